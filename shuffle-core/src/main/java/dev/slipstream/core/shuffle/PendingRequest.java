package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.EndpointDescriptor;
import java.util.concurrent.CompletableFuture;

/**
 * A write request this process sent and waits for: it completes when the holder's signal
 * reaches the expected byte count, or fails (holder failure message, lost peer, deadline).
 *
 * <p>Threading: completed from transport threads or the owning fetcher; the future completes
 * exactly once.
 */
final class PendingRequest {
  final long requestId;
  final EndpointDescriptor holder;
  final long signalOffset;
  final long expected;
  final long deadlineNanos;
  final CompletableFuture<Void> done = new CompletableFuture<>();

  PendingRequest(long requestId, EndpointDescriptor holder, long signalOffset, long expected, long deadlineNanos) {
    this.requestId = requestId;
    this.holder = holder;
    this.signalOffset = signalOffset;
    this.expected = expected;
    this.deadlineNanos = deadlineNanos;
  }
}
