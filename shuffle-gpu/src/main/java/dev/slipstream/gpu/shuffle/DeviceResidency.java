package dev.slipstream.gpu.shuffle;

/**
 * Told when a map output's bytes come into device memory and before they leave it, so that
 * something serving from device memory (a resident server's directory) follows the store.
 * Called under the store's lock; {@link #leaving} returns only once nothing reads the output's
 * device memory through it any more.
 */
public interface DeviceResidency {
  /**
   * Map output {@code mapAttemptId} of {@code shuffleId} is in {@code block} (device address
   * {@code block.address()}; a {@link GpuOutputSpace.SlabBlock} names its registered region too):
   * partition p at [offsets[p], offsets[p + 1]), counts[p] rows.
   */
  void arrived(int shuffleId, long mapAttemptId, OutputSpace.Block block, long[] offsets, long[] counts);

  /** The output's device memory is about to be freed or its bytes moved to host memory. */
  void leaving(int shuffleId, long mapAttemptId);
}
