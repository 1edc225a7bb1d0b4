package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.RegisteredRegion;
import java.util.concurrent.CompletableFuture;

/**
 * A write request this process sent and waits for: it completes when the holder's signal
 * reaches the expected piece count ({@link LandingSignal}), or fails (holder failure message, lost peer, deadline,
 * cancelled by its fetcher).
 *
 * <p>The request owns the registration of its landing range ({@link #region}): the only region
 * id and key under which the holder may write it. {@link #revoke()} closes that registration;
 * once it returns, no byte of this request (late, stale or forged) can land, so the range may be
 * freed and its bytes handed to Spark without changing under it. The node revokes a request as it
 * completes or fails, before the future completes.
 *
 * <p>Threading: completed from transport threads, the node's timer or the owning fetcher; the
 * future completes exactly once. {@link #revoke()} is idempotent, and every caller returns only
 * once the registration is closed.
 */
final class PendingRequest {
  final long requestId;
  final int shuffleId;
  final EndpointDescriptor holder;
  /** This request's registration of its landing range; null when none was made (failed at once). */
  final RegisteredRegion region;
  final long signalOffset;
  /** The pieces the signal reaches when everything landed. */
  final long expected;
  /** The signal's value when the request completed (set before its future completes). */
  volatile long signalled;
  final CompletableFuture<Void> done = new CompletableFuture<>();
  private boolean revoked;

  PendingRequest(long requestId, int shuffleId, EndpointDescriptor holder, RegisteredRegion region, long signalOffset,
                 long expected) {
    this.requestId = requestId;
    this.shuffleId = shuffleId;
    this.holder = holder;
    this.region = region;
    this.signalOffset = signalOffset;
    this.expected = expected;
  }

  /** Closes this request's landing registration, waiting for any inbound access in progress. */
  synchronized void revoke() {
    if (!revoked) {
      revoked = true;
      if (region != null) {
        region.close();
      }
    }
  }
}
