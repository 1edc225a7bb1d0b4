package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.HostRegion;
import dev.slipstream.core.transport.MessageHandler;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.PeerText;
import dev.slipstream.core.transport.RegionTable;
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
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.handler.timeout.IdleStateHandler;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import java.io.IOException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The receiving end of one inbound connection: applies a peer's writes, signals and fetch-adds
 * to the registered regions and hands its messages to the {@link MessageHandler}.
 *
 * <p>Every operation is validated before memory is touched (region registered, key equal, the
 * whole write's range inside the region without overflow, signals 8-aligned and inside). A
 * rejected operation writes nothing and is answered with ERROR(seq, code, message); the
 * connection stays up. An undecodable frame is answered with ERROR(0, ...) and the connection is
 * closed. ACKs and ERRORs are flushed once per read batch.
 *
 * <p>Threading: one instance per connection; every method runs on the connection's event loop,
 * so the connection's frames are applied strictly in arrival order on one thread, and a signal is
 * applied (with a volatile read-modify-write) only after the data before it. Listeners and the
 * message handler run on that thread after the memory is written and outside any region access.
 * Ownership: inbound frames are released here.
 *
 * <p>Opening: without authentication the connection must open with a HELLO, within the policy's
 * open timeout, in a frame of at most {@link TcpHandshake#MAX_FRAME_BEFORE_HELLO} bytes. The HELLO
 * must name a tcp endpoint (no extra bytes) and, when this receiver knows its application id, that
 * application; otherwise the connection is refused with ERROR(0, MALFORMED, TIMEOUT or
 * WRONG_APPLICATION) and closed, with nothing written.
 *
 * <p>Authentication: with a {@link TcpAuth} (a shared secret is configured), the connection must
 * open with AUTH_HELLO (held to the same checks as a HELLO), and nothing is acted on until the
 * client's AUTH_PROOF has checked; any other frame, a wrong proof, or no proof within the deadline
 * is answered with ERROR(0, AUTH_FAILED) and the connection is closed, with nothing written. Until
 * then frames may be at most {@link TcpAuth#MAX_FRAME_BEFORE_AUTH} bytes.
 *
 * <p>Logs: peer-supplied strings are escaped ({@link PeerText}); WARN lines about refused
 * connections are rate-limited per peer address ({@link TcpInboundGuard.Policy#log}).
 */
final class TcpServerHandler extends ChannelInboundHandlerAdapter {
  private static final Logger LOG = LoggerFactory.getLogger(TcpServerHandler.class);

  private final RegionTable regions;
  private final TransportMetrics metrics;
  private final Supplier<MessageHandler> handler;
  private final String local;
  /** Null when no shared secret is configured (connections open with a plain HELLO). */
  private final TcpAuth auth;
  private final TcpInboundGuard.Policy policy;
  private int maxFrameBytes;

  /** The peer, from its HELLO (or once its AUTH_PROOF checked); null until then: nothing is acted on. */
  private PeerIdentity peer;
  /** Authentication in progress: what AUTH_HELLO claimed, and both nonces (null before AUTH_HELLO). */
  private PeerIdentity claimed;
  private byte[] clientNonce;
  private byte[] serverNonce;
  /** Closes the connection when it has not sent its HELLO (or authenticated) within the open timeout. */
  private ScheduledFuture<?> openDeadline;
  /** While the parts of a rejected multi-part write still arrive: its seq (one ERROR per op). */
  private boolean skippingRejected;
  private long rejectedSeq;
  private boolean failed;

  TcpServerHandler(RegionTable regions, TransportMetrics metrics, Supplier<MessageHandler> handler, String local) {
    this(regions, metrics, handler, local, null, TcpInboundGuard.Policy.defaults());
  }

  /**
   * @param auth the shared-secret check every connection must pass first, or null for none
   * @param policy the application id, deadlines and limits every connection is held to
   */
  TcpServerHandler(RegionTable regions, TransportMetrics metrics, Supplier<MessageHandler> handler, String local,
                   TcpAuth auth, TcpInboundGuard.Policy policy) {
    this.regions = regions;
    this.metrics = metrics;
    this.handler = handler;
    this.local = local;
    this.auth = auth;
    this.policy = policy;
  }

  /**
   * Installs the server side of a connection: an idle timer (when the policy has an idle timeout),
   * decoder, encoder, the {@link TcpInboundGuard}, this handler. Until the HELLO (or the
   * authentication) frames may be at most the largest valid HELLO (AUTH_HELLO).
   */
  static void initPipeline(ChannelPipeline p, int maxFrameBytes, TcpServerHandler handler) {
    TcpFrameDecoder decoder = new TcpFrameDecoder(maxFrameBytes);
    handler.maxFrameBytes = maxFrameBytes;
    if (handler.auth != null) {
      decoder.limit(Math.min(maxFrameBytes, TcpAuth.MAX_FRAME_BEFORE_AUTH), "the limit before authentication completes");
    } else {
      decoder.limit(Math.min(maxFrameBytes, TcpHandshake.MAX_FRAME_BEFORE_HELLO), "the limit before HELLO");
    }
    long idleMs = handler.policy.idleTimeout().toMillis();
    if (idleMs > 0) {
      p.addLast("idle", new IdleStateHandler(idleMs, 0, 0, TimeUnit.MILLISECONDS));
    }
    p.addLast("decoder", decoder);
    p.addLast("encoder", TcpFrameEncoder.INSTANCE);
    p.addLast("guard", new TcpInboundGuard(handler.policy, handler.metrics, handler.local));
    p.addLast("receiver", handler);
  }

  @Override
  public void handlerAdded(ChannelHandlerContext ctx) {
    long ms = policy.openTimeout().toMillis();
    openDeadline = ctx.executor().schedule(() -> {
      if (peer == null && !failed && ctx.channel().isOpen()) {
        metrics.onConnectionTimedOut();
        if (auth != null) {
          rejectAuth(ctx, "no authentication within " + ms + " ms (" + TcpConfig.CONNECT_TIMEOUT.key()
              + "), expected AUTH_HELLO and AUTH_PROOF");
        } else {
          rejectConnection(ctx, new TransportException(TransportError.TIMEOUT, "no HELLO within " + ms + " ms ("
              + TcpConfig.CONNECT_TIMEOUT.key() + "), expected HELLO as the first frame"));
        }
      }
    }, ms, TimeUnit.MILLISECONDS);
  }

  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    try {
      if (failed || !ctx.channel().isOpen()) {
        return; // refused or closed (by the guard too): nothing more is acted on
      }
      if (msg instanceof DecodeFailure f) {
        if (auth != null && peer == null) {
          rejectAuth(ctx, "undecodable frame before authentication completed: " + TcpFrame.detail(f.error()));
        } else {
          rejectConnection(ctx, f.error());
        }
      } else if (peer == null) {
        if (auth != null) {
          authenticate(ctx, (TcpFrame) msg);
        } else if (msg instanceof Hello h) {
          if (wellFormed(ctx, h.identity(), "HELLO") && sameApplication(ctx, h.identity())) {
            peer = h.identity();
            opened(ctx);
          }
        } else if (msg instanceof AuthHello h) {
          rejectAuth(ctx, "client " + h.identity() + " asks to authenticate, but this transport has no shared secret"
              + " (spark.authenticate is off here; it must be on in every process or in none)");
        } else {
          rejectConnection(ctx, new TransportException(TransportError.MALFORMED,
              "got a " + ((TcpFrame) msg).type() + " frame first, expected HELLO"));
        }
      } else if (msg instanceof Write w) {
        write(ctx, w.seq(), w.dst(), w.length(), w.partOffset(), w.payload(), null, 0, w.isLast());
      } else if (msg instanceof WriteSignal w) {
        write(ctx, w.seq(), w.dst(), w.length(), w.partOffset(), w.payload(), w.signal(), w.delta(), w.isLast());
      } else if (msg instanceof Signal s) {
        signal(ctx, s);
      } else if (msg instanceof FetchAdd f) {
        fetchAdd(ctx, f);
      } else if (msg instanceof Send s) {
        send(ctx, s);
      } else {
        rejectConnection(ctx, new TransportException(TransportError.MALFORMED, "got a "
            + ((TcpFrame) msg).type() + " frame from a client, expected WRITE, WRITE_SIGNAL, SIGNAL, FETCH_ADD or SEND"));
      }
    } finally {
      ReferenceCountUtil.release(msg);
    }
  }

  /**
   * Whether the identity a HELLO or AUTH_HELLO states is well formed: a tcp endpoint without extra
   * bytes. Refuses the connection otherwise.
   */
  private boolean wellFormed(ChannelHandlerContext ctx, PeerIdentity id, String frame) {
    EndpointDescriptor e = id.endpoint();
    if (!TcpTransportProvider.NAME.equals(e.transport()) || e.extra().length != 0) {
      rejectConnection(ctx, new TransportException(TransportError.MALFORMED, frame + " names endpoint "
          + PeerText.escape(e) + " with " + e.extra().length + " extra bytes, expected a tcp endpoint without extra"
          + " bytes"));
      return false;
    }
    return true;
  }

  /**
   * Whether a connection's stated identity belongs to this receiver's application (when it knows
   * one). Refuses the connection otherwise. With a shared secret this is checked only once the
   * client has proved the secret, so a stranger learns nothing of the application.
   */
  private boolean sameApplication(ChannelHandlerContext ctx, PeerIdentity id) {
    EndpointDescriptor e = id.endpoint();
    String expected = policy.applicationId();
    if (!expected.isEmpty() && !expected.equals(id.applicationId())) {
      rejectConnection(ctx, new TransportException(TransportError.WRONG_APPLICATION, "client " + PeerText.escape(e)
          + " (executor '" + PeerText.escape(id.executorId()) + "') belongs to application '"
          + PeerText.escape(id.applicationId()) + "', expected '" + PeerText.escape(expected)
          + "' (this transport's application): a stale peer entry, or a port reused by another application"));
      return false;
    }
    return true;
  }

  /** The connection opened: the peer is known, full-size frames may follow. */
  private void opened(ChannelHandlerContext ctx) {
    openDeadline.cancel(false);
    ((TcpFrameDecoder) ctx.pipeline().get("decoder")).limit(maxFrameBytes, TcpConfig.MAX_FRAME_BYTES.key());
  }

  /** One step of the handshake (see {@link TcpAuth}); acts on nothing else. */
  private void authenticate(ChannelHandlerContext ctx, TcpFrame msg) {
    if (clientNonce == null) {
      if (msg instanceof AuthHello h) {
        if (!wellFormed(ctx, h.identity(), "AUTH_HELLO")) {
          return;
        }
        claimed = h.identity();
        clientNonce = h.clientNonce();
        serverNonce = auth.newNonce();
        ctx.writeAndFlush(new AuthChallenge(serverNonce, auth.serverProof(clientNonce, serverNonce, claimed)));
      } else if (msg instanceof Hello h) {
        rejectAuth(ctx, "client " + h.identity() + " sent HELLO without authenticating, expected AUTH_HELLO: this"
            + " transport requires the shared secret (spark.authenticate is on here)");
      } else {
        rejectAuth(ctx, "got a " + msg.type() + " frame before authentication, expected AUTH_HELLO");
      }
    } else if (msg instanceof AuthProof p) {
      if (TcpAuth.matches(auth.clientProof(clientNonce, serverNonce, claimed), p.clientProof())) {
        if (!sameApplication(ctx, claimed)) {
          return;
        }
        peer = claimed;
        opened(ctx);
        metrics.onAuthenticated();
      } else {
        rejectAuth(ctx, "client " + claimed + " did not prove it holds the shared secret: its AUTH_PROOF does not"
            + " match (the two sides have different spark.authenticate secrets)");
      }
    } else {
      rejectAuth(ctx, "got a " + msg.type() + " frame from " + claimed + " before its AUTH_PROOF, expected AUTH_PROOF");
    }
  }

  private void rejectAuth(ChannelHandlerContext ctx, String message) {
    metrics.onAuthFailed();
    rejectConnection(ctx, new TransportException(TransportError.AUTH_FAILED, message));
  }

  private void write(ChannelHandlerContext ctx, long seq, Target dst, long length, long partOffset,
                     ByteBuf payload, Target signal, long delta, boolean last) {
    if (skippingRejected && seq == rejectedSeq) {
      skippingRejected = !last; // a later part of a write already rejected (and answered)
      return;
    }
    try {
      HostRegion r = regions.checkWrite(dst.regionId(), dst.key(), dst.offset(), length);
      HostRegion s = signal == null ? null
          : regions.checkAtomic(signal.regionId(), signal.key(), signal.offset());
      boolean applySignal = last && s != null;
      long newValue = 0;
      enter(r, dst);
      try {
        boolean other = applySignal && s != r;
        if (other) {
          enter(s, signal);
        }
        try {
          r.put(dst.offset() + partOffset, payload.nioBuffer());
          if (applySignal) {
            newValue = s.getAndAdd(signal.offset(), delta) + delta;
          }
        } finally {
          if (other) {
            s.endAccess();
          }
        }
      } finally {
        r.endAccess();
      }
      if (last) {
        metrics.onWriteReceived(length);
        if (applySignal) {
          notifySignal(s, signal.offset(), newValue);
        }
        ctx.write(new Ack(seq, 0));
      }
    } catch (TransportException e) {
      skippingRejected = !last;
      rejectedSeq = seq;
      reject(ctx, seq, e);
    }
  }

  private void signal(ChannelHandlerContext ctx, Signal f) {
    try {
      Target t = f.signal();
      HostRegion s = regions.checkAtomic(t.regionId(), t.key(), t.offset());
      enter(s, t);
      long newValue;
      try {
        newValue = s.getAndAdd(t.offset(), f.delta()) + f.delta();
      } finally {
        s.endAccess();
      }
      notifySignal(s, t.offset(), newValue);
      ctx.write(new Ack(f.seq(), 0));
    } catch (TransportException e) {
      reject(ctx, f.seq(), e);
    }
  }

  private void fetchAdd(ChannelHandlerContext ctx, FetchAdd f) {
    try {
      Target t = f.dst();
      HostRegion r = regions.checkAtomic(t.regionId(), t.key(), t.offset());
      enter(r, t);
      long old;
      try {
        old = r.getAndAdd(t.offset(), f.delta());
      } finally {
        r.endAccess();
      }
      ctx.write(new Ack(f.seq(), old));
    } catch (TransportException e) {
      reject(ctx, f.seq(), e);
    }
  }

  private void send(ChannelHandlerContext ctx, Send s) {
    MessageHandler h = handler.get();
    if (h == null) {
      reject(ctx, s.seq(), new TransportException(TransportError.UNKNOWN_TYPE,
          "peer " + local + " has no message handler installed"));
      return;
    }
    metrics.onMessageReceived();
    try {
      h.onMessage(peer, s.payload().nioBuffer().asReadOnlyBuffer());
    } catch (RuntimeException e) {
      policy.log().warn(TcpInboundGuard.logKey(ctx.channel().remoteAddress()),
          "message handler of " + local + " failed on a message from " + peer, e);
      reject(ctx, s.seq(), new TransportException(TransportError.INTERNAL, "message handler at " + local
          + " failed: " + e));
      return;
    }
    ctx.write(new Ack(s.seq(), 0));
  }

  private static void enter(HostRegion r, Target t) throws TransportException {
    if (!r.beginAccess()) {
      throw new TransportException(TransportError.UNKNOWN_REGION,
          "region " + t.regionId() + " was deregistered while the operation arrived");
    }
  }

  private void notifySignal(HostRegion s, long offset, long newValue) {
    try {
      s.notifySignal(offset, newValue);
    } catch (RuntimeException e) {
      LOG.warn("signal listener of region {} at {} failed", s.descriptor().id(), local, e);
    }
  }

  private void reject(ChannelHandlerContext ctx, long seq, TransportException e) {
    metrics.onRejected();
    if (LOG.isDebugEnabled()) {
      LOG.debug("{} rejected operation {} from {}: {}", local, seq, peer, PeerText.escape(e.getMessage()));
    }
    ctx.write(ErrorReply.of(seq, e));
  }

  /** Answers ERROR(0, ...) and closes: the stream cannot be trusted past an undecodable frame. */
  private void rejectConnection(ChannelHandlerContext ctx, TransportException e) {
    failed = true;
    metrics.onRejected();
    policy.log().warn(TcpInboundGuard.logKey(ctx.channel().remoteAddress()), local + " closes the connection from "
        + (peer != null ? peer : PeerText.escape(ctx.channel().remoteAddress())) + ": "
        + PeerText.escape(e.getMessage(), ErrorReply.MAX_MESSAGE_CHARS));
    if (ctx.channel().isWritable()) {
      ctx.writeAndFlush(ErrorReply.of(0, e)).addListener(ChannelFutureListener.CLOSE);
    } else {
      ctx.close(); // the peer does not read its replies: the ERROR would wait behind them
    }
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    if (openDeadline != null) {
      openDeadline.cancel(false);
    }
    if (auth != null && peer == null && !failed) {
      failed = true;
      metrics.onAuthFailed();
      policy.log().warn(TcpInboundGuard.logKey(ctx.channel().remoteAddress()), local + ": connection from "
          + PeerText.escape(ctx.channel().remoteAddress()) + " closed before it authenticated" + (clientNonce == null
          ? "" : " (it left after this transport's AUTH_CHALLENGE: the client did not accept its proof, so the two"
          + " sides likely have different spark.authenticate secrets)"));
    }
    ctx.fireChannelInactive();
  }

  @Override
  public void channelReadComplete(ChannelHandlerContext ctx) {
    ctx.flush();
    ctx.fireChannelReadComplete();
  }

  @Override
  public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
    if (evt instanceof ChannelInputShutdownEvent && !failed) {
      // The peer finished sending: answer what it sent, then close.
      ctx.writeAndFlush(Unpooled.EMPTY_BUFFER).addListener(ChannelFutureListener.CLOSE);
    }
    ctx.fireUserEventTriggered(evt);
  }

  @Override
  public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
    if (cause instanceof IOException) {
      LOG.debug("connection from {} to {} failed", peer, local, cause);
      ctx.close();
    } else if (!failed) {
      LOG.warn("receiver {} failed on a connection from {}", local, peer, cause); // a flaw here, not the peer's input
      rejectConnection(ctx, new TransportException(TransportError.INTERNAL, "receiver failed: " + cause));
    } else {
      ctx.close();
    }
  }
}
