package dev.slipstream.spark.gpu;

import java.util.Optional;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.shuffle.BaseShuffleHandle;

/**
 * The handle of a GPU shuffle: a dependency whose partitioner is a {@link GpuPartitioner}
 * ({@link SlipstreamGpuShuffle}), or a {@link DeviceTableDependency} (a columnar engine's tables).
 */
public final class GpuShuffleHandle<K, V, C> extends BaseShuffleHandle<K, V, C> {
  private static final long serialVersionUID = 1L;

  public GpuShuffleHandle(int shuffleId, ShuffleDependency<K, V, C> dependency) {
    super(shuffleId, dependency);
  }

  /** True when {@code dependency} is shuffled on the GPU path. */
  public static boolean isGpu(ShuffleDependency<?, ?, ?> dependency) {
    return dependency.partitioner() instanceof GpuPartitioner || dependency instanceof DeviceTableDependency;
  }

  /**
   * Payload column widths of the packed blocks: the {@link GpuPartitioner}'s, or none for device
   * tables, whose blocks travel as 8-byte words ({@link DeviceTableBlock}).
   */
  public int[] widths() {
    return dependency().partitioner() instanceof GpuPartitioner g ? g.widths() : new int[0];
  }

  /** The engine's codec when this is a device-table shuffle. */
  public Optional<DeviceTableCodec> deviceTables() {
    return dependency() instanceof DeviceTableDependency d ? Optional.of(d.deviceTables()) : Optional.empty();
  }

  public GpuPartitioner partitioner() {
    return (GpuPartitioner) dependency().partitioner();
  }
}
