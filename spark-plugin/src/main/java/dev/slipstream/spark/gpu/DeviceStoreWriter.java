package dev.slipstream.spark.gpu;

import dev.slipstream.spark.adapter.Scala;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.ShuffleWriter;
import scala.Option;

/**
 * What the GPU path's map-side writers share: the map status of a finished write, and on
 * {@link #stop} without success the removal of whatever the task left in the device map-output
 * store. Threading: the task thread.
 */
abstract class DeviceStoreWriter<K, V> extends ShuffleWriter<K, V> {
  private final int shuffleId;
  protected final long mapId;
  protected final ExecutorGpu runtime;
  protected MapStatus status;
  protected long[] partitionLengths = new long[0];
  /**
   * The device store's removal mark when the task began writing: its output is dropped at commit if
   * the shuffle was removed since (a task of a stage Spark was cancelling).
   */
  protected final long begun;
  private boolean stopping;

  DeviceStoreWriter(int shuffleId, long mapId, ExecutorGpu runtime) {
    this.shuffleId = shuffleId;
    this.mapId = mapId;
    this.runtime = runtime;
    this.begun = runtime.current().map(g -> g.store().removalMark()).orElse(Long.MAX_VALUE);
  }

  @Override
  public Option<MapStatus> stop(boolean success) {
    if (stopping) {
      return Scala.none();
    }
    stopping = true;
    if (success && status != null) {
      return Scala.some(status);
    }
    runtime.current().ifPresent(g -> g.store().removeMapOutput(shuffleId, mapId));
    return Scala.none();
  }

  @Override
  public long[] getPartitionLengths() {
    return partitionLengths;
  }
}
