package dev.slipstream.spark.gpu;

import dev.slipstream.gpu.shuffle.GpuEndpoint;
import dev.slipstream.spark.rpc.PeerInfo;

/**
 * What the driver's peer table tells one executor about another's GPU: CUDA IPC handles and device
 * landing keys (the landing descriptor) and request-ring paths go only to executors of the same
 * machine ({@link GpuEndpoint#sharedWith}), which are the only ones that can push into that GPU's
 * landing region; others get the GPU's identity, enough to read over the staging path. Stateless.
 */
public final class GpuPeers {
  private GpuPeers() {}

  /**
   * {@code peer} as {@code recipient} (its own peer entry; null when unknown) may see it: unchanged
   * without a GPU endpoint or for itself; otherwise its GPU endpoint shared with the recipient's.
   */
  public static PeerInfo visibleTo(PeerInfo peer, PeerInfo recipient) {
    if (peer.gpu().isEmpty() || (recipient != null && recipient.executorId().equals(peer.executorId()))) {
      return peer;
    }
    GpuEndpoint g = peer.gpu().get();
    GpuEndpoint shared = g.sharedWith(recipient == null ? null : recipient.gpu().orElse(null));
    return shared == g ? peer : peer.withGpu(shared);
  }
}
