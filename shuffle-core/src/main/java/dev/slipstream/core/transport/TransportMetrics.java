package dev.slipstream.core.transport;

import java.util.concurrent.atomic.LongAccumulator;
import java.util.concurrent.atomic.LongAdder;

/**
 * Counters of one transport. Outbound counters count what this process posted and the peer
 * acknowledged; inbound counters count what peers wrote into this process's regions.
 *
 * <p>Threading: all methods are thread-safe.
 */
public final class TransportMetrics {
  private final LongAdder bytesWritten = new LongAdder();
  private final LongAdder writes = new LongAdder();
  private final LongAdder signals = new LongAdder();
  private final LongAdder messagesSent = new LongAdder();
  private final LongAdder bytesReceived = new LongAdder();
  private final LongAdder writesReceived = new LongAdder();
  private final LongAdder messagesReceived = new LongAdder();
  private final LongAdder rejected = new LongAdder();
  private final LongAdder failed = new LongAdder();
  private final LongAdder authenticated = new LongAdder();
  private final LongAdder authFailures = new LongAdder();
  private final LongAdder connectionsRefused = new LongAdder();
  private final LongAdder connectionsTimedOut = new LongAdder();
  private final LongAdder connectionsUnread = new LongAdder();
  private final LongAccumulator peakPendingReplyBytes = new LongAccumulator(Math::max, 0);

  public void onWriteCompleted(long bytes) {
    bytesWritten.add(bytes);
    writes.increment();
  }

  public void onSignalCompleted() {
    signals.increment();
  }

  public void onMessageSent() {
    messagesSent.increment();
  }

  public void onWriteReceived(long bytes) {
    bytesReceived.add(bytes);
    writesReceived.increment();
  }

  public void onMessageReceived() {
    messagesReceived.increment();
  }

  /** An inbound operation this process refused (bad region, key, range, frame). */
  public void onRejected() {
    rejected.increment();
  }

  /** An outbound operation that completed exceptionally. */
  public void onFailed() {
    failed.increment();
  }

  /** A connection (inbound or outbound) that completed mutual authentication. */
  public void onAuthenticated() {
    authenticated.increment();
  }

  /** A connection (inbound or outbound) refused or closed because authentication failed. */
  public void onAuthFailed() {
    authFailures.increment();
  }

  /** An inbound connection refused at once: the receiver had as many as it allows. */
  public void onConnectionRefused() {
    connectionsRefused.increment();
  }

  /** An inbound connection closed because it did not open (HELLO, handshake) in time, or went idle. */
  public void onConnectionTimedOut() {
    connectionsTimedOut.increment();
  }

  /** An inbound connection closed because its peer left too many replies unread. */
  public void onConnectionUnread() {
    connectionsUnread.increment();
  }

  /** Reply bytes one inbound connection had pending (written, not yet taken by the socket). */
  public void onPendingReplyBytes(long bytes) {
    peakPendingReplyBytes.accumulate(bytes);
  }

  public long bytesWritten() { return bytesWritten.sum(); }
  public long writes() { return writes.sum(); }
  public long signals() { return signals.sum(); }
  public long messagesSent() { return messagesSent.sum(); }
  public long bytesReceived() { return bytesReceived.sum(); }
  public long writesReceived() { return writesReceived.sum(); }
  public long messagesReceived() { return messagesReceived.sum(); }
  public long rejected() { return rejected.sum(); }
  public long failed() { return failed.sum(); }
  public long authenticated() { return authenticated.sum(); }
  public long authFailures() { return authFailures.sum(); }
  public long connectionsRefused() { return connectionsRefused.sum(); }
  public long connectionsTimedOut() { return connectionsTimedOut.sum(); }
  public long connectionsUnread() { return connectionsUnread.sum(); }
  /** The most reply bytes any inbound connection had pending at once. */
  public long peakPendingReplyBytes() { return peakPendingReplyBytes.get(); }

  @Override
  public String toString() {
    return "bytesWritten=" + bytesWritten() + " writes=" + writes() + " signals=" + signals()
        + " messagesSent=" + messagesSent() + " bytesReceived=" + bytesReceived()
        + " writesReceived=" + writesReceived() + " messagesReceived=" + messagesReceived()
        + " rejected=" + rejected() + " failed=" + failed() + " authenticated=" + authenticated()
        + " authFailures=" + authFailures() + " connectionsRefused=" + connectionsRefused()
        + " connectionsTimedOut=" + connectionsTimedOut() + " connectionsUnread=" + connectionsUnread()
        + " peakPendingReplyBytes=" + peakPendingReplyBytes();
  }
}
