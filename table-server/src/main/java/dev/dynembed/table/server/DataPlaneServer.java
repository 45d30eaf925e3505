package dev.dynembed.table.server;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.common.dataplane.DataPlaneFrames;
import dev.dynembed.table.common.dataplane.DataPlaneFrames.Frame;
import dev.dynembed.table.engine.ReplyBudget;
import dev.dynembed.table.engine.ShardCommands;
import dev.dynembed.table.engine.ShardEngine;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.TopKRequest;
import dev.dynembed.table.v1.WriteRequest;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslHandler;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executor;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The shard's native data plane (docs/design/0015-data-plane.md): Read, Write and TopK calls in
 * {@link DataPlaneFrames} over TCP (epoll where available), beside the gRPC server that keeps
 * every other call. A call runs through the same {@link TableGrpcService#runRead}/{@link
 * TableGrpcService#runWrite}/{@link TableGrpcService#topKAnswer} as its gRPC twin, so
 * validation, the call ledger, the write-ahead log and the memory budget are one code path for
 * both transports.
 *
 * <p>Security is the gRPC server's: the same TLS key and trust managers (certificates reloaded
 * as they are there), the same {@link AccessControl} (a connection's HELLO carries the bearer
 * token, or its TLS client certificate names the caller; Read, Write and TopK need any role,
 * checked once per connection). Limits (docs/design/0009, "What one caller can take"): frames up
 * to the gRPC message limit, and before HELLO up to a HELLO's size; connections capped ({@link
 * ConnectionLimits}: in all, and waiting for their HELLO, the oldest of which makes room for a
 * newer one), closed without a HELLO in time or when idle; at most {@link
 * Limits#MAX_CALLS_PER_CONNECTION} calls of a connection off its event loop at once (waiting for
 * the disk, a top-k scan or a large read on the server's pool), counted per frame; every read's
 * and top-k's reply reserved in the shard's {@code ReplyBudget} until written; and a connection
 * whose replies the client does not read stops being read (Netty's write-buffer water marks).
 */
final class DataPlaneServer implements AutoCloseable {
  private static final Logger log = Logger.getLogger(DataPlaneServer.class.getName());

  private final TableGrpcService service;
  private final ShardEngine engine;
  private final SslContext ssl;
  private final AccessControl access;
  private final ShardMetrics metrics;
  private final Executor offload;
  private final EventLoopGroup boss;
  private final EventLoopGroup workers;
  private final Channel channel;
  private final ConnectionLimits limits;
  private final Counters counters = new Counters();
  /** Connections waiting for their HELLO, oldest first. */
  private final java.util.concurrent.ConcurrentLinkedDeque<Connection> waiting =
      new java.util.concurrent.ConcurrentLinkedDeque<>();

  /**
   * @param port 0: any free port ({@link #port()})
   * @param ssl TLS, or null for plaintext
   * @param access who may call, or null for anyone
   * @param metrics call counters, or null
   * @param offload where calls that wait for the disk run (fsync always), off the event loop
   */
  DataPlaneServer(TableGrpcService service, ShardEngine engine, String host, int port,
      SslContext ssl, AccessControl access, ShardMetrics metrics, Executor offload,
      int threads, ConnectionLimits limits) {
    this.limits = limits.withinDescriptors();
    this.service = service;
    this.engine = engine;
    this.ssl = ssl;
    this.access = access;
    this.metrics = metrics;
    this.offload = offload;
    this.boss = DataPlaneFrames.eventLoops(1, "data-plane-accept-" + engine.shardIndex());
    this.workers = DataPlaneFrames.eventLoops(threads, "data-plane-" + engine.shardIndex());
    try {
      this.channel = new ServerBootstrap().group(boss, workers)
          .channel(DataPlaneFrames.serverChannel())
          .childOption(ChannelOption.TCP_NODELAY, true)
          .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK,
              new WriteBufferWaterMark(8 << 20, 32 << 20))
          .childHandler(new ChannelInitializer<SocketChannel>() {
            @Override
            protected void initChannel(SocketChannel ch) {
              if (ssl != null) {
                ch.pipeline().addLast("tls", ssl.newHandler(ch.alloc()));
              }
              ch.pipeline().addLast("calls", new Connection());
            }
          })
          .bind(new InetSocketAddress(host, port)).syncUninterruptibly().channel();
    } catch (RuntimeException e) {
      boss.shutdownGracefully(0, 1, java.util.concurrent.TimeUnit.SECONDS);
      workers.shutdownGracefully(0, 1, java.util.concurrent.TimeUnit.SECONDS);
      throw new IllegalStateException("data plane: cannot listen on " + host + ":" + port + ": "
          + e.getMessage(), e);
    }
  }

  int port() {
    return ((InetSocketAddress) channel.localAddress()).getPort();
  }

  @Override
  public void close() {
    channel.close().syncUninterruptibly();
    boss.shutdownGracefully(0, 2, java.util.concurrent.TimeUnit.SECONDS);
    workers.shutdownGracefully(0, 2, java.util.concurrent.TimeUnit.SECONDS).syncUninterruptibly();
  }

  /**
   * What the data plane lets connections take before and after their HELLO.
   *
   * @param maxConnections connections open at once (each is a file descriptor: the cap keeps
   *     the gRPC port and the log reachable when a client opens thousands)
   * @param maxUnauthenticated of them, connections that have not sent a valid HELLO yet
   * @param helloTimeout a connection without a valid HELLO after this long is closed
   * @param idleTimeout a connection that sent nothing for this long, with no call running, is
   *     closed (the client reconnects on its next call); zero: never
   */
  record ConnectionLimits(int maxConnections, int maxUnauthenticated,
      java.time.Duration helloTimeout, java.time.Duration idleTimeout) {
    static final ConnectionLimits DEFAULTS = new ConnectionLimits(1024, 128,
        java.time.Duration.ofSeconds(10), java.time.Duration.ofMinutes(10));

    ConnectionLimits {
      if (maxConnections < 1 || maxUnauthenticated < 1 || maxUnauthenticated > maxConnections) {
        throw new IllegalArgumentException("data plane: connection caps must be >= 1, those"
            + " before HELLO at most the total; got " + maxConnections + " and "
            + maxUnauthenticated);
      }
      if (helloTimeout.isNegative() || helloTimeout.isZero() || idleTimeout.isNegative()) {
        throw new IllegalArgumentException("data plane: the HELLO timeout must be > 0 and the"
            + " idle timeout >= 0");
      }
    }

    /**
     * These caps, the total at most a quarter of the process's file descriptors (the rest stay
     * for gRPC, the log, snapshots and the disk tier).
     */
    ConnectionLimits withinDescriptors() {
      long fds = maxFileDescriptors();
      if (fds <= 0 || maxConnections <= fds / 4) {
        return this;
      }
      int total = (int) Math.max(16, fds / 4);
      return new ConnectionLimits(total, Math.min(maxUnauthenticated, total), helloTimeout,
          idleTimeout);
    }

    private static long maxFileDescriptors() {
      var os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
      return os instanceof com.sun.management.UnixOperatingSystemMXBean u
          ? u.getMaxFileDescriptorCount() : -1;
    }
  }

  /** Counts of what the data plane refused or closed, for metrics and tests. */
  static final class Counters {
    final java.util.concurrent.atomic.AtomicInteger open =
        new java.util.concurrent.atomic.AtomicInteger();
    final java.util.concurrent.atomic.AtomicInteger unauthenticated =
        new java.util.concurrent.atomic.AtomicInteger();
    final java.util.concurrent.atomic.AtomicLong refusedConnections =
        new java.util.concurrent.atomic.AtomicLong();
    final java.util.concurrent.atomic.AtomicLong helloTimeouts =
        new java.util.concurrent.atomic.AtomicLong();
    final java.util.concurrent.atomic.AtomicLong idleCloses =
        new java.util.concurrent.atomic.AtomicLong();
    final java.util.concurrent.atomic.AtomicLong preHelloDrops =
        new java.util.concurrent.atomic.AtomicLong();
    /** Most calls of one connection that were off its event loop at once. */
    final java.util.concurrent.atomic.AtomicInteger peakOffloaded =
        new java.util.concurrent.atomic.AtomicInteger();
  }

  /** The largest frame before HELLO (after its length field): a HELLO with the longest token. */
  static final int MAX_HELLO_FRAME = DataPlaneFrames.HEADER - 4 + 4
      + DataPlaneFrames.MAX_TOKEN_BYTES;

  Counters counters() {
    return counters;
  }

  /**
   * One client connection: HELLO first, then READ, WRITE and TOPK frames, answered by call
   * number. The connection cuts its own frames out of the byte stream (no frame decoder in front)
   * so that the frame limit follows its state (a HELLO's size until one is accepted) and so that
   * a frame is taken only while the connection may run another call: at most {@link
   * Limits#MAX_CALLS_PER_CONNECTION} of its calls off its event loop and its replies read by the
   * client; frames read meanwhile wait, whole or not, in {@link #pending}.
   */
  private final class Connection extends io.netty.channel.ChannelInboundHandlerAdapter {
    private ChannelHandlerContext ctx;
    private boolean admitted;
    private boolean counted;
    private boolean closing;
    private boolean taking; // in takeFrames (a write may call back into it)
    private int offloaded; // calls running off the loop (event loop thread only)
    private ByteBuf pending; // bytes read and not yet cut into frames
    private io.netty.util.concurrent.ScheduledFuture<?> helloDeadline;

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
      this.ctx = ctx;
      counted = true;
      int open = counters.open.incrementAndGet();
      if (open > limits.maxConnections() && dropOldestWaiting()) {
        open--; // a connection still waiting for its HELLO makes room for this one
      }
      if (open > limits.maxConnections()) {
        counters.refusedConnections.incrementAndGet();
        closeWith(ctx, ErrorCode.RESOURCE_EXHAUSTED, "shard " + engine.shardIndex() + " has "
            + (open - 1) + " data-plane connections open, its limit (" + limits.maxConnections()
            + "); close idle ones");
        return;
      }
      // past the cap of connections waiting for their HELLO, the oldest of them is closed, not
      // this one: a client that sends its HELLO at once always gets in, and one who holds silent
      // connections must keep opening them faster than clients say HELLO to keep anyone out
      waiting.add(this);
      counters.unauthenticated.incrementAndGet();
      while (counters.unauthenticated.get() > limits.maxUnauthenticated()
          && dropOldestWaiting()) {
        // the oldest waiting connection closes (on its own event loop)
      }
      helloDeadline = ctx.executor().schedule(() -> {
        if (!admitted && !closing) {
          counters.helloTimeouts.incrementAndGet();
          closeWith(ctx, ErrorCode.DEADLINE_EXCEEDED, "data plane: no HELLO within "
              + limits.helloTimeout().toMillis() + " ms of connecting");
        }
      }, limits.helloTimeout().toNanos(), java.util.concurrent.TimeUnit.NANOSECONDS);
      ctx.fireChannelActive();
    }

    /** Closes the connection that has waited longest for its HELLO; false if there is none. */
    private boolean dropOldestWaiting() {
      Connection oldest = waiting.pollFirst();
      if (oldest == null) {
        return false;
      }
      counters.unauthenticated.decrementAndGet();
      oldest.ctx.executor().execute(oldest::droppedForNewer);
      return true;
    }

    /** Closed to make room for a newer connection before its HELLO (its own event loop). */
    private void droppedForNewer() {
      if (!admitted && !closing) {
        counters.refusedConnections.incrementAndGet();
        closeWith(ctx, ErrorCode.RESOURCE_EXHAUSTED, "shard " + engine.shardIndex() + " has"
            + " more data-plane connections waiting for their HELLO than its limit ("
            + limits.maxUnauthenticated() + "), or more connections than "
            + limits.maxConnections() + "; the oldest waiting ones are closed");
      }
    }

    /** No longer waiting for its HELLO; false if it was already dropped for a newer one. */
    private boolean leaveWaiting() {
      if (waiting.remove(this)) {
        counters.unauthenticated.decrementAndGet();
        return true;
      }
      return false;
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      if (counted) {
        counted = false;
        counters.open.decrementAndGet();
        leaveWaiting();
      }
      if (helloDeadline != null) {
        helloDeadline.cancel(false);
      }
      closing = true;
      releasePending();
      ctx.fireChannelInactive();
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
      if (evt instanceof io.netty.handler.timeout.IdleStateEvent && offloaded == 0
          && admitted && !closing) {
        counters.idleCloses.incrementAndGet();
        closeWith(ctx, ErrorCode.UNAVAILABLE, "data plane: connection idle for "
            + limits.idleTimeout().toSeconds() + " s; reconnect");
        return;
      }
      ctx.fireUserEventTriggered(evt);
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ByteBuf in = (ByteBuf) msg;
      if (closing) {
        in.release();
        return;
      }
      pending = pending == null ? in
          : io.netty.handler.codec.ByteToMessageDecoder.MERGE_CUMULATOR.cumulate(ctx.alloc(),
              pending, in);
      takeFrames(ctx);
    }

    /** Cuts and runs whole frames while the connection may run another call. */
    private void takeFrames(ChannelHandlerContext ctx) {
      if (taking) {
        return; // a reply's write changed the writability: the loop below looks again
      }
      taking = true;
      try {
        takeWholeFrames(ctx);
      } finally {
        taking = false;
      }
      // nothing more is read from the socket while a call cannot be taken
      ctx.channel().config().setAutoRead(!closing && ctx.channel().isWritable()
          && offloaded < Limits.MAX_CALLS_PER_CONNECTION);
    }

    private void takeWholeFrames(ChannelHandlerContext ctx) {
      while (!closing && pending != null && pending.readableBytes() >= 4
          && offloaded < Limits.MAX_CALLS_PER_CONNECTION && ctx.channel().isWritable()) {
        long length = pending.getUnsignedInt(pending.readerIndex());
        long limit = admitted ? DataPlaneFrames.MAX_FRAME : MAX_HELLO_FRAME;
        if (length > limit) {
          if (!admitted) {
            counters.preHelloDrops.incrementAndGet();
          }
          closeWith(ctx, ErrorCode.RESOURCE_EXHAUSTED, admitted
              ? "data plane: a frame of " + length + " bytes exceeds the limit of " + limit
                  + " bytes"
              : "data plane: a frame of " + length + " bytes before HELLO; until a HELLO is"
                  + " accepted a frame holds at most " + limit + " bytes (a HELLO with a token"
                  + " of at most " + DataPlaneFrames.MAX_TOKEN_BYTES + " bytes)");
          return;
        }
        if (pending.readableBytes() < 4 + length) {
          break;
        }
        pending.skipBytes(4);
        ByteBuf frame = pending.readRetainedSlice((int) length);
        try {
          onFrame(ctx, frame);
        } finally {
          frame.release();
        }
      }
      if (pending != null && !pending.isReadable()) {
        releasePending();
      } else if (pending != null && pending.refCnt() == 1) {
        // only while no frame of it is held by a call off the loop: discarding moves the bytes
        // that a held frame's request aliases (the cumulator copies a shared buffer instead)
        pending.discardSomeReadBytes();
      }
    }

    private void releasePending() {
      if (pending != null) {
        pending.release();
        pending = null;
      }
    }

    private void onFrame(ChannelHandlerContext ctx, ByteBuf msg) {
      Frame f;
      // flags (byte 1) and reserved (bytes 2-3) after the length field must be 0
      boolean unusedBits = msg.readableBytes() >= 4
          && (msg.getByte(msg.readerIndex() + 1) != 0 || msg.getShort(msg.readerIndex() + 2) != 0);
      try {
        f = Frame.of(msg);
      } catch (TableException e) {
        closeWith(ctx, e.code(), e.getMessage());
        return;
      }
      if (unusedBits && !admitted) {
        closeWith(ctx, ErrorCode.INVALID_ARGUMENT, "data plane: a frame's flags and reserved"
            + " bytes must be 0");
        return;
      }
      if (f.kind() == DataPlaneFrames.HELLO) {
        hello(ctx, f);
        return;
      }
      if (!admitted) {
        closeWith(ctx, ErrorCode.UNAUTHENTICATED, "shard " + engine.shardIndex()
            + ": a data-plane connection starts with HELLO");
        return;
      }
      byte kind = f.kind();
      String method = switch (kind) { // the calls a client may make here, by metrics name
        case DataPlaneFrames.READ -> "Read";
        case DataPlaneFrames.WRITE -> "Write";
        case DataPlaneFrames.TOPK -> "TopK";
        default -> null;
      };
      if (method == null) {
        closeWith(ctx, ErrorCode.INVALID_ARGUMENT, "shard " + engine.shardIndex()
            + ": a client may send READ, WRITE or TOPK frames, not "
            + DataPlaneFrames.kindName(kind));
        return;
      }
      long start = metrics == null ? 0 : metrics.begin();
      long call = f.call();
      if (unusedBits) {
        end(method, ErrorCode.INVALID_ARGUMENT.grpcName(), start);
        reply(ctx, DataPlaneFrames.error(ctx.alloc(), call, ErrorCode.INVALID_ARGUMENT,
            "data plane: a frame's flags and reserved bytes must be 0"), null);
        return;
      }
      Object request;
      ShardCommands.ReadCost cost;
      ReplyBudget.Lease lease;
      String table = "";
      try {
        // in place: the request aliases the frame, which is held until the call is answered
        request = switch (kind) {
          case DataPlaneFrames.READ ->
              DataPlaneFrames.parseInPlace(f.body(), ReadRequest.parser(), "READ");
          case DataPlaneFrames.WRITE ->
              DataPlaneFrames.parseInPlace(f.body(), WriteRequest.parser(), "WRITE");
          default -> DataPlaneFrames.parseInPlace(f.body(), TopKRequest.parser(), "TOPK");
        };
        if (request instanceof ReadRequest r) {
          table = TableGrpcService.readTable(r);
          String t = table;
          cost = service.execute(t, () -> service.readCost(r.getItemsList()));
        } else if (request instanceof TopKRequest t) {
          table = t.getTable();
          cost = service.topKCost(t); // a scan is large: never on the event loop
        } else {
          cost = ShardCommands.ReadCost.NONE;
        }
        // the reply's memory, reserved before anything is built; free again once written (a
        // write's answer is a few bytes a item: nothing to reserve)
        lease = cost.replyBytes() == 0 ? null : engine.replies().reserve(cost.replyBytes(), table);
      } catch (TableException e) {
        end(method, e.code().grpcName(), start);
        reply(ctx, DataPlaneFrames.error(ctx.alloc(), call, e.code(), e.getMessage()), null);
        return;
      }
      // off the event loop: calls that wait for the disk (fsync always, as gRPC does), top-k
      // scans and large reads (a short index search or a training step answers here)
      Executor elsewhere = cost.large() ? service.scans()
          : request instanceof TopKRequest ? null
          : TableServer.waitsForDisk(engine) ? offload : null;
      if (elsewhere == null) {
        answer(ctx, call, request, method, start, lease);
        return;
      }
      counters.peakOffloaded.accumulateAndGet(++offloaded, Math::max);
      msg.retain(); // the request aliases the frame: held until answered
      try {
        elsewhere.execute(() -> {
          try {
            answer(ctx, call, request, method, start, lease);
          } finally {
            msg.release();
            ctx.executor().execute(() -> {
              offloaded--;
              takeFrames(ctx); // frames held back while the connection was at its cap
            });
          }
        });
      } catch (RuntimeException e) { // shutting down: the call never runs
        msg.release();
        if (lease != null) {
          lease.close();
        }
        offloaded--;
        throw e;
      }
    }

    private void answer(ChannelHandlerContext ctx, long call, Object request, String method,
        long start, ReplyBudget.Lease lease) {
      ByteBuf reply;
      String code = "OK";
      try {
        if (request instanceof ReadRequest r) {
          // the engine's one command path, the answers written straight into direct buffers
          DirectReplies codec = new DirectReplies(engine, service, ctx.alloc());
          reply = DataPlaneFrames.parts(ctx.alloc(), DataPlaneFrames.READ_OK, call,
              service.execute(TableGrpcService.readTable(r),
                  () -> engine.commands().read(r.getCallId(),
                      ShardCommands.routedAt(r.getMapEpoch()), r.getItemsList(), codec)));
        } else if (request instanceof TopKRequest t) {
          reply = DataPlaneFrames.message(ctx.alloc(), DataPlaneFrames.TOPK_OK, call,
              service.execute(t.getTable(), () -> service.topKAnswer(t)));
        } else {
          WriteRequest w = (WriteRequest) request;
          reply = DataPlaneFrames.message(ctx.alloc(), DataPlaneFrames.WRITE_OK, call,
              service.execute(TableGrpcService.writeTable(w), () -> service.runWrite(w)));
        }
      } catch (TableException e) {
        code = e.code().grpcName();
        reply = DataPlaneFrames.error(ctx.alloc(), call, e.code(), e.getMessage());
      } catch (RuntimeException | Error e) { // nothing built may outlive the call unanswered
        if (lease != null) {
          lease.close();
        }
        throw e;
      }
      end(method, code, start);
      reply(ctx, reply, lease);
    }

    /** Writes a reply; its reserved memory is given back once the socket took it (or failed). */
    private void reply(ChannelHandlerContext ctx, ByteBuf reply, ReplyBudget.Lease lease) {
      if (lease == null) {
        ctx.writeAndFlush(reply, ctx.voidPromise());
      } else {
        ctx.writeAndFlush(reply).addListener(f -> lease.close());
      }
    }

    private void end(String method, String code, long start) {
      if (metrics != null) {
        metrics.end(method, code, start);
      }
    }

    private void hello(ChannelHandlerContext ctx, Frame f) {
      ByteBuf b = f.body();
      if (admitted) {
        closeWith(ctx, ErrorCode.FAILED_PRECONDITION, "data plane: a connection sends HELLO"
            + " once");
        return;
      }
      if (b.readableBytes() < 4) {
        closeWith(ctx, ErrorCode.INVALID_ARGUMENT, "data plane: a HELLO of "
            + b.readableBytes() + " bytes is too short");
        return;
      }
      int version = b.readUnsignedShort();
      int tokenBytes = b.readUnsignedShort();
      if (version != DataPlaneFrames.VERSION) {
        closeWith(ctx, ErrorCode.FAILED_PRECONDITION, "shard " + engine.shardIndex() + " speaks"
            + " data-plane version " + DataPlaneFrames.VERSION + ", the client " + version
            + "; use --data-plane grpc or a matching client");
        return;
      }
      if (tokenBytes > DataPlaneFrames.MAX_TOKEN_BYTES) {
        closeWith(ctx, ErrorCode.INVALID_ARGUMENT, "data plane: a HELLO's token of "
            + tokenBytes + " bytes is longer than the limit of " + DataPlaneFrames.MAX_TOKEN_BYTES
            + " bytes");
        return;
      }
      if (tokenBytes != b.readableBytes()) {
        closeWith(ctx, ErrorCode.INVALID_ARGUMENT, "data plane: a HELLO's token length "
            + tokenBytes + " does not match its " + b.readableBytes() + " bytes");
        return;
      }
      String token = tokenBytes == 0 ? null
          : b.readCharSequence(tokenBytes, StandardCharsets.UTF_8).toString();
      if (access != null) {
        SslHandler tls = ctx.pipeline().get(SslHandler.class);
        try {
          access.identify(token, tls == null ? null : tls.engine().getSession());
        } catch (TableException e) {
          closeWith(ctx, e.code(), e.getMessage());
          return;
        }
      }
      if (!leaveWaiting()) {
        return; // closed meanwhile to make room for a newer connection
      }
      admitted = true;
      if (helloDeadline != null) {
        helloDeadline.cancel(false);
      }
      if (!limits.idleTimeout().isZero()) {
        ctx.pipeline().addBefore(ctx.name(), "idle", new io.netty.handler.timeout.IdleStateHandler(
            limits.idleTimeout().toNanos(), 0, 0, java.util.concurrent.TimeUnit.NANOSECONDS));
      }
      ctx.writeAndFlush(DataPlaneFrames.helloOk(ctx.alloc()), ctx.voidPromise());
    }

    /**
     * Answers with an ERROR about the connection (call number 0, docs/design/0015) and closes
     * it; nothing more is read from it.
     */
    private void closeWith(ChannelHandlerContext ctx, ErrorCode code, String desc) {
      if (closing) {
        return;
      }
      closing = true;
      releasePending();
      ctx.channel().config().setAutoRead(false);
      ctx.writeAndFlush(DataPlaneFrames.error(ctx.alloc(), 0, code, desc))
          .addListener(io.netty.channel.ChannelFutureListener.CLOSE);
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
      // replies pile up when the client does not read them: its calls wait meanwhile
      takeFrames(ctx);
      ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      log.log(Level.FINE, "data plane: connection from " + ctx.channel().remoteAddress()
          + " failed", cause);
      ctx.close();
    }
  }
}
