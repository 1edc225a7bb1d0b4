package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.PeerText;
import dev.slipstream.core.transport.RemoteAddress;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.TransportMetrics;
import dev.slipstream.core.transport.tcp.TcpFrame.Ack;
import dev.slipstream.core.transport.tcp.TcpHandshake.AuthChallenge;
import dev.slipstream.core.transport.tcp.TcpHandshake.AuthHello;
import dev.slipstream.core.transport.tcp.TcpHandshake.AuthProof;
import dev.slipstream.core.transport.tcp.TcpFrame.ErrorReply;
import dev.slipstream.core.transport.tcp.TcpFrame.FetchAdd;
import dev.slipstream.core.transport.tcp.TcpHandshake.Hello;
import dev.slipstream.core.transport.tcp.TcpFrame.Send;
import dev.slipstream.core.transport.tcp.TcpFrame.Signal;
import dev.slipstream.core.transport.tcp.TcpFrame.Target;
import dev.slipstream.core.transport.tcp.TcpFrame.Write;
import dev.slipstream.core.transport.tcp.TcpFrame.WriteSignal;
import dev.slipstream.core.transport.tcp.TcpFrameDecoder.DecodeFailure;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The queue to one peer over one tcp connection.
 *
 * <p>Posting: an operation becomes one group of frames (a write larger than a frame is split
 * into parts; the signal of writeAndSignal rides on every part and is applied after the last),
 * registered under one sequence number and appended to a lock-free outbox. The first post after
 * a flush schedules one drain task on the connection's event loop, which writes every group in
 * the outbox in order and flushes once: posting never blocks and concurrent posts batch into one
 * socket flush. The connection is opened asynchronously; frames wait in the outbox until the
 * HELLO has been written. Payloads are not copied: a frame wraps a view of the caller's buffer.
 *
 * <p>Authentication: with a {@link TcpAuth}, the connection opens with AUTH_HELLO instead, and
 * frames wait in the outbox until the receiver's AUTH_CHALLENGE proof has checked and this
 * queue's AUTH_PROOF is written. A wrong proof, any other reply first, or no challenge within the
 * deadline fails every operation with AUTH_FAILED and closes the connection; nothing is sent to a
 * receiver that has not proved it holds the secret.
 *
 * <p>Completion: ACK completes the operation's future normally (fetchAdd with the old value),
 * ERROR completes it with a TransportException carrying the receiver's code and message. When
 * the connection closes or fails, or the queue is closed, every outstanding future fails once
 * with PEER_LOST or CLOSED (the pattern of Spark's {@code
 * TransportResponseHandler.failOutstandingRequests}); a future completes exactly once because the
 * outstanding map hands each entry to exactly one completer.
 *
 * <p>Threading: public methods are thread-safe and never block. Responses, draining and failure
 * handling run on the connection's event loop; futures complete there, so dependent stages that
 * are not {@code *Async} run on the event loop and must not block.
 */
final class TcpPeerQueue implements PeerQueue {
  private static final Logger LOG = LoggerFactory.getLogger(TcpPeerQueue.class);
  /** Operation groups written per drain task before it yields the event loop to reads. */
  private static final int MAX_OPS_PER_DRAIN = 512;

  private enum Kind { WRITE, WRITE_SIGNAL, SIGNAL, FETCH_ADD, SEND }

  /** An operation awaiting its ACK or ERROR. */
  private record Pending(Kind kind, long bytes, CompletableFuture<Object> future) {}

  private final EndpointDescriptor peer;
  /** What this queue's HELLO (or AUTH_HELLO) states: this transport's endpoint, application and executor. */
  private final PeerIdentity local;
  private final TransportMetrics metrics;
  private final int maxFrameBytes;
  private final ConcurrentHashMap<Long, Pending> outstanding = new ConcurrentHashMap<>();
  private final ConcurrentLinkedQueue<TcpFrame[]> outbox = new ConcurrentLinkedQueue<>();
  private final AtomicBoolean drainScheduled = new AtomicBoolean();
  private final AtomicLong nextSeq = new AtomicLong();
  private final AtomicReference<TransportException> closedCause = new AtomicReference<>();
  private final Runnable drainTask = this::drain;
  private final ChannelFuture connectFuture;
  /** Null when no shared secret is configured. */
  private final TcpAuth auth;
  private volatile Channel channel;
  /** Event loop only: the HELLO went out (or authentication completed), frames may follow. */
  private boolean helloSent;
  /** Event loop only: this side's nonce while authentication is in progress. */
  private byte[] clientNonce;
  private ScheduledFuture<?> authDeadline;
  private volatile Throwable lastCause;
  /** Told once, when this queue shuts down (the transport drops it from its cache). */
  private final Consumer<TcpPeerQueue> onShutdown;

  /**
   * Starts connecting to {@code address} (resolved, or a host name the template's resolver looks
   * up off the event loop); operations may be posted at once. With {@code auth} non-null the
   * connection authenticates before any operation goes out (null: no secret). {@code onShutdown}
   * is called once when the queue shuts down, on whatever thread shuts it down.
   */
  TcpPeerQueue(Bootstrap template, InetSocketAddress address, EndpointDescriptor peer,
               PeerIdentity local, TransportMetrics metrics, int maxFrameBytes, TcpAuth auth,
               Consumer<TcpPeerQueue> onShutdown) {
    this.onShutdown = onShutdown;
    this.auth = auth;
    this.peer = peer;
    this.local = local;
    this.metrics = metrics;
    this.maxFrameBytes = maxFrameBytes;
    Bootstrap b = template.clone().handler(new ChannelInitializer<Channel>() {
      @Override
      protected void initChannel(Channel ch) {
        channel = ch;
        ch.pipeline().addLast("decoder", new TcpFrameDecoder(maxFrameBytes));
        ch.pipeline().addLast("encoder", TcpFrameEncoder.INSTANCE);
        ch.pipeline().addLast("responses", new Responses());
      }
    });
    connectFuture = b.connect(address);
    channel = connectFuture.channel();
    // Catch-all: whatever closes the channel (connect failure, timeout, reset) fails the rest.
    channel.closeFuture().addListener(f -> shutdown(new TransportException(TransportError.PEER_LOST,
        connectFuture.isSuccess() ? "connection to " + peer + " lost" + causeSuffix(lastCause)
            : "cannot connect to " + peer + causeSuffix(connectFuture.cause()))));
  }

  private static String causeSuffix(Throwable t) {
    return t == null ? "" : ": " + t;
  }

  @Override
  public EndpointDescriptor peer() {
    return peer;
  }

  @Override
  public CompletableFuture<Void> write(ByteBuffer src, RemoteAddress dst) {
    return data(src, dst, null, 0);
  }

  @Override
  public CompletableFuture<Void> writeAndSignal(ByteBuffer src, RemoteAddress dst, RemoteAddress signal, long delta) {
    return data(src, dst, Objects.requireNonNull(signal, "signal"), delta);
  }

  private CompletableFuture<Void> data(ByteBuffer src, RemoteAddress dst, RemoteAddress signal, long delta) {
    Objects.requireNonNull(src, "src");
    Objects.requireNonNull(dst, "dst");
    long seq = nextSeq.incrementAndGet();
    int total = src.remaining();
    int fields = signal == null ? Write.FIELDS_LENGTH : WriteSignal.FIELDS_LENGTH;
    int maxPart = maxFrameBytes - TcpFrame.HEADER_LENGTH - fields;
    int parts = total == 0 ? 1 : (int) ((total + (long) maxPart - 1) / maxPart);
    TcpFrame[] frames = new TcpFrame[parts];
    Target d = Target.of(dst);
    Target s = signal == null ? null : Target.of(signal);
    for (int i = 0; i < parts; i++) {
      int off = i * maxPart;
      ByteBuf p = wrap(src, off, Math.min(maxPart, total - off));
      frames[i] = s == null ? new Write(seq, d, total, off, p) : new WriteSignal(seq, d, total, off, s, delta, p);
    }
    return post(seq, frames, signal == null ? Kind.WRITE : Kind.WRITE_SIGNAL, total);
  }

  @Override
  public CompletableFuture<Void> signal(RemoteAddress signal, long delta) {
    long seq = nextSeq.incrementAndGet();
    return post(seq, new TcpFrame[] {new Signal(seq, Target.of(signal), delta)}, Kind.SIGNAL, 0);
  }

  @Override
  public CompletableFuture<Long> fetchAdd(RemoteAddress dst, long delta) {
    long seq = nextSeq.incrementAndGet();
    return post(seq, new TcpFrame[] {new FetchAdd(seq, Target.of(dst), delta)}, Kind.FETCH_ADD, 0);
  }

  @Override
  public CompletableFuture<Void> send(ByteBuffer message) {
    int max = maxFrameBytes - TcpFrame.HEADER_LENGTH - Send.FIELDS_LENGTH;
    if (message.remaining() > max) {
      return failed(new TransportException(TransportError.MALFORMED, "message of " + message.remaining()
          + " bytes exceeds the largest SEND payload " + max + " (" + TcpConfig.MAX_FRAME_BYTES.key() + " "
          + maxFrameBytes + " less the frame header)"));
    }
    long seq = nextSeq.incrementAndGet();
    return post(seq, new TcpFrame[] {new Send(seq, wrap(message, 0, message.remaining()))}, Kind.SEND, 0);
  }

  /** A view of {@code len} bytes of {@code src} from its position + {@code from}; no copy. */
  private static ByteBuf wrap(ByteBuffer src, int from, int len) {
    return len == 0 ? Unpooled.EMPTY_BUFFER : Unpooled.wrappedBuffer(src.slice(src.position() + from, len));
  }

  @SuppressWarnings("unchecked")
  private <T> CompletableFuture<T> post(long seq, TcpFrame[] frames, Kind kind, long bytes) {
    CompletableFuture<Object> f = new CompletableFuture<>();
    Pending p = new Pending(kind, bytes, f);
    TransportException cause = closedCause.get();
    if (cause == null) {
      outstanding.put(seq, p);
      // Re-check: shutdown() sets the cause before it sweeps the map, so either it sees this
      // entry or this thread sees the cause.
      cause = closedCause.get();
      if (cause == null) {
        outbox.add(frames);
        scheduleDrain();
        return (CompletableFuture<T>) (CompletableFuture<?>) f;
      }
      if (outstanding.remove(seq, p)) {
        fail(p, cause);
      }
    } else {
      fail(p, cause);
    }
    release(frames);
    return (CompletableFuture<T>) (CompletableFuture<?>) f;
  }

  private <T> CompletableFuture<T> failed(TransportException e) {
    metrics.onFailed();
    return CompletableFuture.failedFuture(e);
  }

  private void scheduleDrain() {
    if (drainScheduled.compareAndSet(false, true)) {
      try {
        channel.eventLoop().execute(drainTask);
      } catch (RejectedExecutionException e) {
        drainScheduled.set(false);
        shutdown(new TransportException(TransportError.CLOSED, "the event loop of the queue to " + peer + " is shut down"));
      }
    }
  }

  /** On the event loop: writes the outbox in order and flushes once. */
  private void drain() {
    drainScheduled.set(false); // before polling: a post after this point schedules another drain
    if (!helloSent) {
      return; // channelActive drains once the HELLO is written
    }
    Channel ch = channel;
    int n = 0;
    TcpFrame[] frames;
    while (n < MAX_OPS_PER_DRAIN && (frames = outbox.poll()) != null) {
      if (closedCause.get() != null || !ch.isActive()) {
        release(frames); // its future is failed by shutdown()
        continue;
      }
      for (TcpFrame frame : frames) {
        ch.write(frame, ch.voidPromise());
      }
      n++;
    }
    if (n > 0) {
      ch.flush();
    }
    if (!outbox.isEmpty()) {
      scheduleDrain();
    }
  }

  private static void release(TcpFrame[] frames) {
    for (TcpFrame f : frames) {
      ReferenceCountUtil.release(f);
    }
  }

  @Override
  public void commit() {
    if (!outbox.isEmpty()) {
      scheduleDrain();
    }
  }

  @Override
  public boolean isOpen() {
    return closedCause.get() == null && channel.isOpen();
  }

  @Override
  public void close() {
    shutdown(new TransportException(TransportError.CLOSED, "queue to " + peer + " is closed"));
    channel.close();
  }

  /**
   * Closes the connection of a queue that is no longer open, without failing what is still
   * outstanding with CLOSED: when its channel has closed and the failure has not been handled yet,
   * the channel's close handling fails it with PEER_LOST and the cause.
   */
  void closeConnection() {
    channel.close();
  }

  /** Fails every outstanding operation with {@code cause} (the first cause wins) and drops the outbox. */
  private void shutdown(TransportException cause) {
    if (closedCause.compareAndSet(null, cause)) {
      LOG.debug("queue from {} to {} shuts down: {}", local, peer, cause.getMessage());
      onShutdown.accept(this);
    }
    TransportException c = closedCause.get();
    for (Long seq : outstanding.keySet()) {
      Pending p = outstanding.remove(seq);
      if (p != null) {
        fail(p, c);
      }
    }
    TcpFrame[] frames;
    while ((frames = outbox.poll()) != null) {
      release(frames);
    }
  }

  // The caller removed p from the outstanding map (or never put it there), so it is the only
  // completer. Metrics are counted before completion so a woken waiter sees them.
  private void fail(Pending p, TransportException e) {
    metrics.onFailed();
    p.future().completeExceptionally(e);
  }

  private void succeed(Pending p, long value) {
    count(p);
    p.future().complete(p.kind() == Kind.FETCH_ADD ? Long.valueOf(value) : null);
  }

  private void count(Pending p) {
    switch (p.kind()) {
      case WRITE -> metrics.onWriteCompleted(p.bytes());
      case WRITE_SIGNAL -> {
        metrics.onWriteCompleted(p.bytes());
        metrics.onSignalCompleted();
      }
      case SIGNAL -> metrics.onSignalCompleted();
      case SEND -> metrics.onMessageSent();
      case FETCH_ADD -> { }
    }
  }

  /** Connection-level failure reported by the receiver or found in its replies: fail all, close. */
  private void failConnection(ChannelHandlerContext ctx, TransportException e) {
    shutdown(e);
    ctx.close();
  }

  /** The client end of the pipeline: sends HELLO, turns ACK and ERROR into completions. */
  private final class Responses extends ChannelInboundHandlerAdapter {
    @Override
    public void channelActive(ChannelHandlerContext ctx) {
      if (auth == null) {
        ctx.write(new Hello(local));
        helloSent = true;
        drain();
        ctx.flush();
      } else {
        clientNonce = auth.newNonce();
        ctx.writeAndFlush(new AuthHello(clientNonce, local));
        long ms = auth.timeout().toMillis();
        authDeadline = ctx.executor().schedule(() -> {
          if (!helloSent) {
            authFailed(ctx, "peer " + peer + " did not answer authentication within " + ms + " ms ("
                + TcpConfig.CONNECT_TIMEOUT.key() + "), expected AUTH_CHALLENGE");
          }
        }, ms, TimeUnit.MILLISECONDS);
      }
      ctx.fireChannelActive();
    }

    /** Before authentication completed: only AUTH_CHALLENGE (or the receiver's ERROR(0)) is expected. */
    private void authenticate(ChannelHandlerContext ctx, Object msg) {
      if (msg instanceof AuthChallenge c) {
        byte[] expected = auth.serverProof(clientNonce, c.serverNonce(), local);
        if (!TcpAuth.matches(expected, c.serverProof())) {
          authFailed(ctx, "peer " + peer + " did not prove it holds the shared secret: its AUTH_CHALLENGE proof does"
              + " not match (the two sides have different spark.authenticate secrets)");
          return;
        }
        ctx.write(new AuthProof(auth.clientProof(clientNonce, c.serverNonce(), local)));
        helloSent = true;
        authDeadline.cancel(false);
        metrics.onAuthenticated();
        drain();
        ctx.flush();
      } else if (msg instanceof ErrorReply e && e.seq() == 0) {
        if (e.code() == TransportError.AUTH_FAILED.code()) {
          metrics.onAuthFailed();
        }
        failConnection(ctx, new TransportException(TransportError.fromCode(e.code()),
            "peer " + peer + " refused the connection: "
            + PeerText.escape(e.message(), ErrorReply.MAX_MESSAGE_CHARS)));
      } else if (msg instanceof DecodeFailure d) {
        authFailed(ctx, "undecodable reply from " + peer + " before authentication completed: "
            + TcpFrame.detail(d.error()));
      } else {
        authFailed(ctx, "got a " + ((TcpFrame) msg).type() + " frame from " + peer
            + " before authentication completed, expected AUTH_CHALLENGE (does it have spark.authenticate on?)");
      }
    }

    private void authFailed(ChannelHandlerContext ctx, String message) {
      metrics.onAuthFailed();
      failConnection(ctx, new TransportException(TransportError.AUTH_FAILED, message));
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      try {
        if (auth != null && !helloSent) {
          authenticate(ctx, msg);
        } else if (msg instanceof Ack a) {
          Pending p = outstanding.remove(a.seq());
          if (p != null) {
            succeed(p, a.value());
          } else {
            LOG.debug("ACK for unknown operation {} from {}", a.seq(), peer);
          }
        } else if (msg instanceof ErrorReply e) {
          if (e.seq() == 0) {
            if (e.code() == TransportError.AUTH_FAILED.code()) {
              metrics.onAuthFailed();
            }
            failConnection(ctx, new TransportException(TransportError.fromCode(e.code()),
                "peer " + peer + " closed the connection: "
                + PeerText.escape(e.message(), ErrorReply.MAX_MESSAGE_CHARS)));
            return;
          }
          Pending p = outstanding.remove(e.seq());
          if (p != null) {
            fail(p, e.toException());
          } else {
            LOG.debug("ERROR for unknown operation {} from {}: {}", e.seq(), peer, PeerText.escape(e.message()));
          }
        } else if (msg instanceof DecodeFailure d) {
          failConnection(ctx, d.error());
        } else {
          failConnection(ctx, new TransportException(TransportError.MALFORMED, "got a "
              + ((TcpFrame) msg).type() + " frame from receiver " + peer + ", expected ACK or ERROR"));
        }
      } finally {
        ReferenceCountUtil.release(msg);
      }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      if (authDeadline != null) {
        authDeadline.cancel(false);
      }
      shutdown(new TransportException(TransportError.PEER_LOST, "connection to " + peer + " lost"
          + causeSuffix(lastCause)));
      ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      if (lastCause == null) {
        lastCause = cause;
      }
      LOG.debug("connection from {} to {} failed", local, peer, cause);
      ctx.close();
    }
  }

  @Override
  public String toString() {
    return "TcpPeerQueue(" + local + " -> " + peer + ", outstanding " + outstanding.size() + ")";
  }
}
