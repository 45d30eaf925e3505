package dev.dynembed.table.client.internal;

import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import com.google.common.util.concurrent.SettableFuture;
import com.google.protobuf.MessageLite;
import com.google.protobuf.Parser;
import dev.dynembed.table.client.ClientOptions;
import dev.dynembed.table.common.dataplane.DataPlaneFrames;
import dev.dynembed.table.common.dataplane.DataPlaneFrames.Frame;
import dev.dynembed.table.v1.DataPlaneResponse;
import dev.dynembed.table.v1.ReadRequest;
import dev.dynembed.table.v1.ReadResponse;
import dev.dynembed.table.v1.TopKRequest;
import dev.dynembed.table.v1.TopKResponse;
import dev.dynembed.table.v1.WriteRequest;
import dev.dynembed.table.v1.WriteResponse;
import io.grpc.Status;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;
import java.io.IOException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import java.util.logging.Logger;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;

/**
 * The client end of a shard's native data plane (docs/design/0015-data-plane.md): one TCP
 * connection, many Read, Write and TopK calls in flight, told apart by call number. The shard's
 * port comes from its gRPC {@code DataPlane} call, asked again on every reconnect (a restarted
 * shard may listen elsewhere); a shard without a data plane, or speaking another version of the
 * frames, is reached through gRPC instead.
 *
 * <p>Failures are reported as gRPC statuses so that {@link GrpcShard}'s one resend loop handles
 * both transports: a connection that cannot be opened or is lost mid-call is UNAVAILABLE with
 * the {@link IOException} as cause (TLS failures with their {@link SSLException}), a call past
 * its deadline DEADLINE_EXCEEDED, a shard's ERROR frame its own code and description.
 */
final class DataPlaneConnection implements AutoCloseable {
  private static final Logger log = Logger.getLogger(DataPlaneConnection.class.getName());
  /** The data-plane event loops of every client in the process (daemon threads). */
  private static final EventLoopGroup LOOPS = DataPlaneFrames.eventLoops(
      Math.min(4, Math.max(1, Runtime.getRuntime().availableProcessors())),
      "table-client-data-plane");

  private final int shard;
  /** Where the shard is now (host:port; it may move: a cluster map's current entry). */
  private final Supplier<String> endpoint;
  private final ClientOptions options;
  private final SslContext ssl;
  /** Asks the shard (over gRPC) where its data plane listens. */
  private final Supplier<ListenableFuture<DataPlaneResponse>> ask;
  private final AtomicLong calls = new AtomicLong();
  private final Object lock = new Object();
  private ListenableFuture<Channel> connection; // under lock; null: connect on the next call
  private volatile boolean grpcOnly; // the shard announced no data plane
  private volatile boolean closed;

  DataPlaneConnection(int shard, Supplier<String> endpoint, ClientOptions options,
      Supplier<ListenableFuture<DataPlaneResponse>> ask) {
    this.shard = shard;
    this.endpoint = endpoint;
    this.options = options;
    this.ask = ask;
    this.ssl = sslContext(options.tls());
  }

  /** The shard's host now (the data plane listens there, on the port the shard announces). */
  private String host() {
    String e = endpoint.get();
    int colon = e.lastIndexOf(':');
    String h = colon < 0 ? e : e.substring(0, colon);
    return h.startsWith("[") && h.endsWith("]") ? h.substring(1, h.length() - 1) : h;
  }

  private static SslContext sslContext(ClientOptions.Tls tls) {
    if (tls == null) {
      return null;
    }
    try {
      SslContextBuilder b = SslContextBuilder.forClient().trustManager(tls.ca().toFile());
      if (tls.cert() != null) {
        b.keyManager(tls.cert().toFile(), tls.key().toFile());
      }
      return b.build();
    } catch (SSLException | IllegalArgumentException e) {
      throw new IllegalArgumentException("tls: cannot load the certificates for the data plane: "
          + e.getMessage(), e);
    }
  }

  /** A Read call; {@code grpc} sends it there instead when the shard has no data plane. */
  ListenableFuture<ReadResponse> read(ReadRequest req, Supplier<ListenableFuture<ReadResponse>> grpc) {
    return call(DataPlaneFrames.READ, req, ReadResponse.parser(), grpc);
  }

  /** A Write call; {@code grpc} sends it there instead when the shard has no data plane. */
  ListenableFuture<WriteResponse> write(WriteRequest req,
      Supplier<ListenableFuture<WriteResponse>> grpc) {
    return call(DataPlaneFrames.WRITE, req, WriteResponse.parser(), grpc);
  }

  /** A TopK call; {@code grpc} sends it there instead when the shard has no data plane. */
  ListenableFuture<TopKResponse> topK(TopKRequest req,
      Supplier<ListenableFuture<TopKResponse>> grpc) {
    return call(DataPlaneFrames.TOPK, req, TopKResponse.parser(), grpc);
  }

  private <R> ListenableFuture<R> call(byte kind, MessageLite req, Parser<R> parser,
      Supplier<ListenableFuture<R>> grpc) {
    if (grpcOnly) {
      return grpc.get();
    }
    ListenableFuture<Channel> conn = connection();
    Channel ch = conn.isDone() ? done(conn) : null;
    if (ch != null && ch.isActive()) {
      return send(ch, kind, req, parser);
    }
    return Futures.transformAsync(conn, c -> c == null ? grpc.get() : send(c, kind, req, parser),
        MoreExecutors.directExecutor());
  }

  private <R> ListenableFuture<R> send(Channel ch, byte kind, MessageLite req, Parser<R> parser) {
    Replies replies = ch.pipeline().get(Replies.class);
    if (replies == null) { // closed since it was handed out: its handlers are gone
      return Futures.immediateFailedFuture(lost(host(), null));
    }
    Map<Long, Pending<?>> pending = replies.pending;
    long id = calls.incrementAndGet();
    Pending<R> p = new Pending<>(parser);
    pending.put(id, p);
    ByteBuf frame;
    try {
      frame = DataPlaneFrames.message(ch.alloc(), kind, id, req);
    } catch (RuntimeException e) {
      pending.remove(id);
      p.future.setException(Status.INTERNAL.withDescription(e.getMessage()).withCause(e)
          .asRuntimeException());
      return p.future;
    }
    long nanos = options.deadline().toNanos();
    p.timeout = ch.eventLoop().schedule(() -> {
      if (pending.remove(id, p)) {
        p.future.setException(Status.DEADLINE_EXCEEDED.withDescription("no answer on the data"
            + " plane within " + Duration.ofNanos(nanos)).asRuntimeException());
      }
    }, nanos, TimeUnit.NANOSECONDS);
    ch.writeAndFlush(frame).addListener(f -> {
      if (!f.isSuccess() && pending.remove(id, p)) {
        p.cancelTimeout();
        p.future.setException(lost(host(), f.cause()));
      }
    });
    return p.future;
  }

  /** The open connection, or one being opened; null inside means "use gRPC". */
  private ListenableFuture<Channel> connection() {
    synchronized (lock) {
      ListenableFuture<Channel> c = connection;
      if (c != null && (!c.isDone() || usable(c))) {
        return c;
      }
      if (closed) {
        return Futures.immediateFailedFuture(Status.UNAVAILABLE
            .withDescription("the client is closed").asRuntimeException());
      }
      SettableFuture<Channel> next = SettableFuture.create();
      connection = next;
      open(next);
      return next;
    }
  }

  private static boolean usable(ListenableFuture<Channel> c) {
    try {
      Channel ch = Futures.getDone(c);
      return ch == null || ch.isActive();
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.CancellationException e) {
      return false; // failed: the next call opens a new one
    }
  }

  /** A completed connection's channel; null for "use gRPC" or a failed one. */
  private static Channel done(ListenableFuture<Channel> c) {
    try {
      return Futures.getDone(c);
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.CancellationException e) {
      return null;
    }
  }

  private void open(SettableFuture<Channel> out) {
    Futures.addCallback(ask.get(), new com.google.common.util.concurrent.FutureCallback<>() {
      @Override
      public void onSuccess(DataPlaneResponse r) {
        if (r.getPort() == 0) {
          if (!grpcOnly) {
            log.info(String.format("shard %d at %s has no native data plane: its Read, Write"
                + " and TopK calls go through gRPC", shard, host()));
          }
          grpcOnly = true;
          out.set(null);
          return;
        }
        if (r.getVersion() != DataPlaneFrames.VERSION) {
          grpcOnly = true; // a shard of another version: gRPC is the common language
          log.warning(String.format("shard %d speaks data-plane version %d, this client %d:"
              + " Read, Write and TopK go through gRPC", shard, r.getVersion(),
              DataPlaneFrames.VERSION));
          out.set(null);
          return;
        }
        connect(r.getPort(), out);
      }

      @Override
      public void onFailure(Throwable t) {
        if (Status.fromThrowable(t).getCode() == Status.Code.UNIMPLEMENTED) {
          grpcOnly = true; // a shard older than the data plane
          out.set(null);
          return;
        }
        out.setException(t); // the shard does not answer: the resend loop tries again
      }
    }, MoreExecutors.directExecutor());
  }

  private void connect(int port, SettableFuture<Channel> out) {
    String host = host();
    Bootstrap b = new Bootstrap().group(LOOPS).channel(DataPlaneFrames.socketChannel())
        .option(ChannelOption.TCP_NODELAY, true)
        .option(ChannelOption.ALLOCATOR, PooledByteBufAllocator.DEFAULT)
        .option(ChannelOption.CONNECT_TIMEOUT_MILLIS,
            (int) Math.min(10_000, options.deadline().toMillis()))
        .handler(new ChannelInitializer<SocketChannel>() {
          @Override
          protected void initChannel(SocketChannel ch) {
            if (ssl != null) {
              SslHandler h = ssl.newHandler(ch.alloc(), host, port);
              SSLEngine e = h.engine();
              SSLParameters p = e.getSSLParameters();
              p.setEndpointIdentificationAlgorithm("HTTPS"); // the host name, as gRPC checks it
              e.setSSLParameters(p);
              ch.pipeline().addLast("tls", h);
            }
            ch.pipeline().addLast("frames", DataPlaneFrames.frameDecoder())
                .addLast("replies", new Replies(out));
          }
        });
    ChannelFuture f = b.connect(host, port);
    f.addListener(c -> {
      if (!c.isSuccess()) {
        out.setException(lost(host, c.cause()));
        return;
      }
      Channel ch = f.channel();
      ch.writeAndFlush(DataPlaneFrames.hello(ch.alloc(), options.bearerToken()));
      // a HELLO left unanswered (a shard that hangs) fails the calls waiting for it
      ch.eventLoop().schedule(() -> {
        if (out.setException(Status.DEADLINE_EXCEEDED.withDescription("the data plane at "
            + host + ":" + port + " did not answer HELLO").asRuntimeException())) {
          ch.close();
        }
      }, options.deadline().toNanos(), TimeUnit.NANOSECONDS);
    });
  }

  /** A connection's failure as the status the resend loop understands. */
  private RuntimeException lost(String host, Throwable cause) {
    Throwable c = cause;
    while (c != null && !(c instanceof SSLException)) {
      c = c.getCause();
    }
    String what = c != null ? "TLS failed: " + c.getMessage()
        : cause == null ? "connection closed" : String.valueOf(cause.getMessage());
    return Status.UNAVAILABLE.withDescription("data plane of shard " + shard + " at " + host
        + ": " + what).withCause(c != null ? c
        : cause instanceof IOException ? cause : new IOException(what, cause))
        .asRuntimeException();
  }

  /** Reads the shard's frames: HELLO's answer, then replies by call number. */
  private final class Replies extends SimpleChannelInboundHandler<ByteBuf> {
    private final SettableFuture<Channel> hello;
    /** This connection's calls in flight by number: its loss fails them and no others. */
    final Map<Long, Pending<?>> pending = new ConcurrentHashMap<>();

    Replies(SettableFuture<Channel> hello) {
      this.hello = hello;
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, ByteBuf msg) {
      Frame f = Frame.of(msg);
      if (f.kind() == DataPlaneFrames.HELLO_OK) {
        hello.set(ctx.channel());
        return;
      }
      if (f.kind() == DataPlaneFrames.ERROR && f.call() == 0) { // about the connection
        RuntimeException s = status(f);
        if (!hello.setException(s)) {
          failAll(s);
        }
        ctx.close();
        return;
      }
      Pending<?> p = pending.remove(f.call());
      if (p == null) {
        return; // past its deadline: its answer is dropped
      }
      p.cancelTimeout();
      if (f.kind() == DataPlaneFrames.ERROR) {
        p.future.setException(status(f));
        return;
      }
      p.complete(f.body());
    }

    /** An ERROR frame as the gRPC status of its code and description. */
    private RuntimeException status(Frame f) {
      DataPlaneFrames.Error e = DataPlaneFrames.Error.of(f.body());
      return Status.fromCode(Status.Code.valueOf(e.code().grpcName()))
          .withDescription(e.description()).asRuntimeException();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      RuntimeException s = lost(host(), null);
      hello.setException(s);
      failAll(s);
      ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      RuntimeException s = lost(host(), cause);
      hello.setException(s);
      failAll(s);
      ctx.close();
    }

    /** Fails every call in flight: the connection is gone (they go out again on a new one). */
    private void failAll(RuntimeException s) {
      for (Map.Entry<Long, Pending<?>> e : pending.entrySet()) {
        Pending<?> p = e.getValue();
        if (pending.remove(e.getKey(), p)) {
          p.cancelTimeout();
          p.future.setException(s);
        }
      }
    }
  }

  private static final class Pending<R> {
    final SettableFuture<R> future = SettableFuture.create();
    final Parser<R> parser;
    volatile ScheduledFuture<?> timeout;

    Pending(Parser<R> parser) {
      this.parser = parser;
    }

    void cancelTimeout() {
      ScheduledFuture<?> t = timeout;
      if (t != null) {
        t.cancel(false);
      }
    }

    void complete(ByteBuf body) {
      try {
        future.set(DataPlaneFrames.parse(body, parser, "reply"));
      } catch (RuntimeException e) {
        future.setException(Status.INTERNAL.withDescription("bad reply on the data plane: "
            + e.getMessage()).asRuntimeException());
      }
    }
  }

  @Override
  public void close() {
    ListenableFuture<Channel> c;
    synchronized (lock) {
      closed = true;
      c = connection;
    }
    Channel ch = c != null && c.isDone() ? done(c) : null;
    if (ch != null) {
      ch.close();
    }
  }
}
