package dev.dynembed.table.server;

import dev.dynembed.table.common.ErrorCode;
import dev.dynembed.table.common.Limits;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.common.dataplane.DataPlaneFrames;
import dev.dynembed.table.common.dataplane.DataPlaneFrames.Frame;
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
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.TooLongFrameException;
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
 * checked once per connection). Limits: frames up to the gRPC message limit, at most {@link
 * Limits#MAX_CALLS_PER_CONNECTION} calls of a connection off its event loop at once (waiting for
 * the disk, or a top-k scan on the server's pool), and a
 * connection whose replies the client does not read stops being read (Netty's write-buffer
 * water marks).
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

  /**
   * @param port 0: any free port ({@link #port()})
   * @param ssl TLS, or null for plaintext
   * @param access who may call, or null for anyone
   * @param metrics call counters, or null
   * @param offload where calls that wait for the disk run (fsync always), off the event loop
   */
  DataPlaneServer(TableGrpcService service, ShardEngine engine, String host, int port,
      SslContext ssl, AccessControl access, ShardMetrics metrics, Executor offload,
      int threads) {
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
              ch.pipeline().addLast("frames", DataPlaneFrames.frameDecoder())
                  .addLast("calls", new Connection());
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

  /** One client connection: HELLO first, then Read and Write frames, answered by call number. */
  private final class Connection extends SimpleChannelInboundHandler<ByteBuf> {
    private boolean admitted;
    private int offloaded; // calls running off the loop (event loop thread only)

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
      Frame f;
      try {
        f = Frame.of(msg);
      } catch (TableException e) {
        fail(ctx, 0, e.code(), e.getMessage(), true);
        return;
      }
      if (f.kind() == DataPlaneFrames.HELLO) {
        hello(ctx, f);
        return;
      }
      if (!admitted) {
        fail(ctx, f.call(), ErrorCode.UNAUTHENTICATED, "shard " + engine.shardIndex()
            + ": a data-plane connection starts with HELLO", true);
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
        fail(ctx, f.call(), ErrorCode.INVALID_ARGUMENT, "shard " + engine.shardIndex()
            + ": a client may send READ, WRITE or TOPK frames, not "
            + DataPlaneFrames.kindName(kind), true);
        return;
      }
      long start = metrics == null ? 0 : metrics.begin();
      Object request;
      try {
        // in place: the request aliases the frame, which is held until the call is answered
        request = switch (kind) {
          case DataPlaneFrames.READ ->
              DataPlaneFrames.parseInPlace(f.body(), ReadRequest.parser(), "READ");
          case DataPlaneFrames.WRITE ->
              DataPlaneFrames.parseInPlace(f.body(), WriteRequest.parser(), "WRITE");
          default -> DataPlaneFrames.parseInPlace(f.body(), TopKRequest.parser(), "TOPK");
        };
      } catch (TableException e) {
        end(method, e.code().grpcName(), start);
        fail(ctx, f.call(), e.code(), e.getMessage(), false);
        return;
      }
      long call = f.call();
      // off the event loop: calls that wait for the disk (fsync always, as gRPC does) and
      // top-k scans (a short index search answers here, as on gRPC)
      Executor elsewhere = request instanceof TopKRequest t
          ? (service.topKInline(t) ? null : service.scans())
          : TableServer.waitsForDisk(engine) ? offload : null;
      if (elsewhere != null) {
        if (++offloaded >= Limits.MAX_CALLS_PER_CONNECTION) {
          ctx.channel().config().setAutoRead(false); // the client's further calls wait in TCP
        }
        msg.retain(); // the request aliases the frame: held until answered
        try {
          elsewhere.execute(() -> {
            try {
              answer(ctx, call, request, method, start);
            } finally {
              msg.release();
              ctx.executor().execute(() -> {
                if (--offloaded < Limits.MAX_CALLS_PER_CONNECTION
                    && ctx.channel().isWritable()) {
                  ctx.channel().config().setAutoRead(true);
                }
              });
            }
          });
        } catch (RuntimeException e) { // shutting down: the call never runs
          msg.release();
          throw e;
        }
      } else {
        answer(ctx, call, request, method, start);
      }
    }

    private void answer(ChannelHandlerContext ctx, long call, Object request, String method,
        long start) {
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
      }
      end(method, code, start);
      ctx.writeAndFlush(reply, ctx.voidPromise());
    }

    private void end(String method, String code, long start) {
      if (metrics != null) {
        metrics.end(method, code, start);
      }
    }

    private void hello(ChannelHandlerContext ctx, Frame f) {
      ByteBuf b = f.body();
      if (b.readableBytes() < 4) {
        fail(ctx, 0, ErrorCode.INVALID_ARGUMENT, "data plane: a HELLO of "
            + b.readableBytes() + " bytes is too short", true);
        return;
      }
      int version = b.readUnsignedShort();
      int tokenBytes = b.readUnsignedShort();
      if (version != DataPlaneFrames.VERSION) {
        fail(ctx, 0, ErrorCode.FAILED_PRECONDITION, "shard " + engine.shardIndex() + " speaks"
            + " data-plane version " + DataPlaneFrames.VERSION + ", the client " + version
            + "; use --data-plane grpc or a matching client", true);
        return;
      }
      if (tokenBytes > DataPlaneFrames.MAX_TOKEN_BYTES || tokenBytes != b.readableBytes()) {
        fail(ctx, 0, ErrorCode.INVALID_ARGUMENT, "data plane: a HELLO's token length "
            + tokenBytes + " does not match its " + b.readableBytes() + " bytes", true);
        return;
      }
      String token = tokenBytes == 0 ? null
          : b.readCharSequence(tokenBytes, StandardCharsets.UTF_8).toString();
      if (access != null) {
        SslHandler tls = ctx.pipeline().get(SslHandler.class);
        try {
          access.identify(token, tls == null ? null : tls.engine().getSession());
        } catch (TableException e) {
          fail(ctx, 0, e.code(), e.getMessage(), true);
          return;
        }
      }
      admitted = true;
      ctx.writeAndFlush(DataPlaneFrames.helloOk(ctx.alloc()), ctx.voidPromise());
    }

    private void fail(ChannelHandlerContext ctx, long call, ErrorCode code, String desc,
        boolean close) {
      var f = ctx.writeAndFlush(DataPlaneFrames.error(ctx.alloc(), call, code, desc));
      if (close) {
        f.addListener(io.netty.channel.ChannelFutureListener.CLOSE);
      }
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
      // replies pile up when the client does not read them: stop reading its calls meanwhile
      ctx.channel().config().setAutoRead(ctx.channel().isWritable()
          && offloaded < Limits.MAX_CALLS_PER_CONNECTION);
      ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      if (cause instanceof TooLongFrameException) {
        fail(ctx, 0, ErrorCode.RESOURCE_EXHAUSTED, "data plane: " + cause.getMessage()
            + " (the limit is " + DataPlaneFrames.MAX_FRAME + " bytes)", true);
        return;
      }
      log.log(Level.FINE, "data plane: connection from " + ctx.channel().remoteAddress()
          + " failed", cause);
      ctx.close();
    }
  }
}
