package dev.slipstream.spark.gpu;

import dev.slipstream.spark.gpu.GpuPartitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.shuffle.BaseShuffleHandle;

/** The handle of a GPU shuffle (a dependency whose partitioner is a {@link GpuPartitioner}). */
public final class GpuShuffleHandle<K, V, C> extends BaseShuffleHandle<K, V, C> {
  private static final long serialVersionUID = 1L;

  public GpuShuffleHandle(int shuffleId, ShuffleDependency<K, V, C> dependency) {
    super(shuffleId, dependency);
  }

  public GpuPartitioner partitioner() {
    return (GpuPartitioner) dependency().partitioner();
  }
}
