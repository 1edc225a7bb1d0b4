package dev.slipstream.spark.gpu;

/**
 * Implemented by a {@link org.apache.spark.ShuffleDependency} whose map records are
 * {@code (reduce partition, device table)} pairs of a columnar engine on the GPU (the RAPIDS
 * Accelerator's exchange in {@code slipstream-rapids-gpu}). Slipstream's manager shuffles such a
 * dependency on its GPU path: the map task's tables are copied into the executor's device
 * map-output store, reducers receive them into device memory over nvlink or GPUNetIO (or the staged
 * path), and the engine's codec turns each landed table back into its own value.
 *
 * <p>The partition a record goes to is its key (an {@code Integer} in {@code [0, numPartitions)});
 * the dependency's partitioner is never asked.
 */
public interface DeviceTableDependency {
  /** How the engine's values map to device tables and back; serialized with the dependency. */
  DeviceTableCodec deviceTables();
}
