package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.PeerText;
import dev.slipstream.core.transport.RateLimitedLog;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportMetrics;
import dev.slipstream.core.transport.tcp.TcpFrame.ErrorReply;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPromise;
import io.netty.handler.timeout.IdleStateEvent;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Bounds what one inbound connection can cost its receiver, whatever its peer does: while the
 * channel is unwritable (its peer does not read the replies) the receiver stops reading it; more
 * than {@link Policy#maxPendingReplyBytes} reply bytes pending closes it at once; a connection
 * without a frame for {@link Policy#idleTimeout} (an {@link IdleStateEvent} of the
 * {@code IdleStateHandler} in front of the pipeline) is closed, answered ERROR(0, TIMEOUT) when it
 * still takes replies. Each close is counted in {@link TransportMetrics} and logged.
 *
 * <p>Sits between the encoder and {@link TcpServerHandler}, so it sees every reply the receiver
 * writes. Threading: one instance per connection, on its event loop.
 */
final class TcpInboundGuard extends ChannelDuplexHandler {
  private static final Logger LOG = LoggerFactory.getLogger(TcpInboundGuard.class);
  /** Interval of the rate-limited WARN lines about refused and closed connections, per peer address. */
  static final long LOG_INTERVAL_NANOS = 10_000_000_000L;

  /**
   * What every inbound connection of one transport is held to.
   *
   * @param applicationId the receiver's application id; empty: HELLOs are not checked against one
   * @param openTimeout how long a connection may take to send its HELLO (or to authenticate)
   * @param idleTimeout how long it may go without a frame; zero: no limit
   * @param maxPendingReplyBytes most reply bytes one connection may have pending
   * @param log WARN lines about refused and closed connections, rate-limited per peer address
   */
  record Policy(String applicationId, Duration openTimeout, Duration idleTimeout, int maxPendingReplyBytes,
                RateLimitedLog log) {
    /** Reply bytes at which a connection stops being writable (and its receiver stops reading it). */
    static final int REPLY_HIGH_WATER = 64 * 1024;
    static final int REPLY_LOW_WATER = 32 * 1024;
    /** Default {@link #maxPendingReplyBytes}: far above what stops reading, so only a flaw in that ever reaches it. */
    static final int MAX_PENDING_REPLY_BYTES = 1 << 20;

    static Policy of(TcpConfig config, String applicationId) {
      return new Policy(applicationId, config.connectTimeout(), config.idleTimeout(), MAX_PENDING_REPLY_BYTES,
          new RateLimitedLog(LOG, LOG_INTERVAL_NANOS));
    }

    /** No application check, 10 s to open, no idle limit (tests that drive one pipeline by hand). */
    static Policy defaults() {
      return new Policy("", Duration.ofSeconds(10), Duration.ZERO, MAX_PENDING_REPLY_BYTES,
          new RateLimitedLog(LOG, LOG_INTERVAL_NANOS));
    }
  }

  private final Policy policy;
  private final TransportMetrics metrics;
  private final String local;
  private long peakPending;
  private long publishedPeak;
  private boolean closing;

  TcpInboundGuard(Policy policy, TransportMetrics metrics, String local) {
    this.policy = policy;
    this.metrics = metrics;
    this.local = local;
  }

  /** The key of rate-limited log lines about {@code remote}: its IP address, whatever its port. */
  static String logKey(SocketAddress remote) {
    return remote instanceof InetSocketAddress a && a.getAddress() != null ? a.getAddress().getHostAddress()
        : String.valueOf(remote);
  }

  @Override
  public void channelWritabilityChanged(ChannelHandlerContext ctx) {
    // Stop reading while the peer does not take its replies: what it sends meanwhile waits in the
    // socket buffers (its own sends then block), not in this process.
    ctx.channel().config().setAutoRead(ctx.channel().isWritable());
    ctx.fireChannelWritabilityChanged();
  }

  @Override
  public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
    ctx.write(msg, promise);
    ChannelOutboundBuffer out = ctx.channel().unsafe().outboundBuffer();
    long pending = out == null ? 0 : out.totalPendingWriteBytes();
    if (pending > peakPending) {
      peakPending = pending;
    }
    if (pending > policy.maxPendingReplyBytes() && !closing) {
      closing = true;
      metrics.onConnectionUnread();
      warn(ctx, "its peer leaves its replies unread: " + pending + " reply bytes pending, more than the "
          + policy.maxPendingReplyBytes() + " allowed");
      publishPeak();
      ctx.close();
    }
  }

  @Override
  public void flush(ChannelHandlerContext ctx) {
    publishPeak();
    ctx.flush();
  }

  private void publishPeak() {
    if (peakPending > publishedPeak) {
      publishedPeak = peakPending;
      metrics.onPendingReplyBytes(peakPending);
    }
  }

  @Override
  public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
    if (!(evt instanceof IdleStateEvent)) {
      ctx.fireUserEventTriggered(evt);
      return;
    }
    if (closing || !ctx.channel().isOpen()) {
      return;
    }
    closing = true;
    long ms = policy.idleTimeout().toMillis();
    if (!ctx.channel().isWritable()) {
      // Reading stopped because the replies went unread; an ERROR would wait behind them.
      metrics.onConnectionUnread();
      ChannelOutboundBuffer out = ctx.channel().unsafe().outboundBuffer();
      warn(ctx, "its peer left its replies unread for " + ms + " ms (" + TcpConfig.IDLE_TIMEOUT.key() + "; "
          + (out == null ? 0 : out.totalPendingWriteBytes()) + " reply bytes pending, reading stopped)");
      ctx.close();
      return;
    }
    metrics.onConnectionTimedOut();
    String why = "no frame for " + ms + " ms (" + TcpConfig.IDLE_TIMEOUT.key() + "), closing the idle connection";
    LOG.debug("{} closes the connection from {}: {}", local, ctx.channel().remoteAddress(), why);
    ctx.writeAndFlush(new ErrorReply(0, TransportError.TIMEOUT.code(), why)).addListener(ChannelFutureListener.CLOSE);
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    publishPeak();
    ctx.fireChannelInactive();
  }

  private void warn(ChannelHandlerContext ctx, String why) {
    SocketAddress remote = ctx.channel().remoteAddress();
    policy.log().warn(logKey(remote), local + " closes the connection from " + PeerText.escape(remote) + ": " + why);
  }
}
