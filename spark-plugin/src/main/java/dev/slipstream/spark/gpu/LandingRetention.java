package dev.slipstream.spark.gpu;

import dev.slipstream.core.gpu.shuffle.DeviceLanding;
import dev.slipstream.spark.rpc.RpcMessages;
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
   * the latest, released as soon as {@code answer} completes with the holder's own answer (at once
   * when it already has).
   */
  public static void retain(DeviceLanding landing, DeviceLanding.Fetch f, String holder, long releaseByNanos,
      CompletableFuture<RpcMessages.DeviceWriteResult> answer) {
    f.retain(holder, releaseByNanos);
    long id = f.request().requestId();
    answer.whenComplete((r, e) -> {
      if (answeredByHolder(r)) {
        landing.finished(id);
      }
    });
  }

  /**
   * Whether {@code r} (null: no answer) is the holder's own answer, which it gives only once its push
   * can store nothing more; a refusal the driver made up while relaying (request id -1) is not.
   */
  public static boolean answeredByHolder(RpcMessages.DeviceWriteResult r) {
    return r != null && r.requestId() != -1;
  }
}
