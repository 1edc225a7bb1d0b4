package dev.slipstream.spark.gpu;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.gpu.shuffle.DeviceLanding;
import java.util.concurrent.CompletableFuture;

/**
 * How a reduce task gives back the landing range of a device write request that ended before its
 * holder finished it: retained ({@link DeviceLanding.Fetch#retain}) until the holder's own answer to
 * that request, the holder's loss ({@link GpuExecutor#peerLost}), or the bound (docs/gpu.md,
 * "Landing ranges belong to one request"). Stateless.
 */
public final class LandingRetention {
  private LandingRetention() {}

  /**
   * Retains {@code f}'s range for {@code holder} until {@code releaseByNanos} (System.nanoTime()) at
   * the latest, released as soon as {@code answer} completes with the holder's answer (at once when
   * it already has); a failed {@code answer} (no answer in time, the holder's connection lost) leaves
   * the range retained.
   */
  public static void retain(DeviceLanding landing, DeviceLanding.Fetch f, String holder, long releaseByNanos,
      CompletableFuture<WriteResult> answer) {
    f.retain(holder, releaseByNanos);
    long id = f.request().requestId();
    answer.whenComplete((r, e) -> {
      if (r != null) { // only the holder answers, and only once its push can store nothing more
        landing.finished(id);
      }
    });
  }
}
