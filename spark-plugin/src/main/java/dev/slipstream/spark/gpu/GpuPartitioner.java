package dev.slipstream.spark.gpu;

import java.util.Arrays;
import org.apache.spark.Partitioner;

/**
 * Marks a shuffle dependency as a GPU shuffle ({@link SlipstreamGpuShuffle}): rows are
 * partitioned on the device by their int64 key ({@code slip_partition_of}), so Spark never asks
 * this partitioner for a record's partition. Carries the payload column widths every batch of the
 * shuffle has.
 */
public final class GpuPartitioner extends Partitioner {
  private static final long serialVersionUID = 1L;
  /** Above this Spark's map statuses no longer carry each block's size, which readers reserve by. */
  public static final int MAX_PARTITIONS = 2000;

  private final int partitions;
  private final int[] widths;

  public GpuPartitioner(int partitions, int[] widths) {
    if (partitions <= 0 || partitions > MAX_PARTITIONS) {
      throw new IllegalArgumentException("GPU shuffle: " + partitions + " partitions, expected 1.." + MAX_PARTITIONS
          + " (above it Spark's map statuses lose the block sizes that readers reserve device memory by)");
    }
    if (widths.length > 8) {
      throw new IllegalArgumentException("GPU shuffle: " + widths.length + " payload columns, expected at most 8");
    }
    for (int w : widths) {
      if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16) {
        throw new IllegalArgumentException("GPU shuffle: payload width " + w + ", expected 1, 2, 4, 8 or 16");
      }
    }
    this.partitions = partitions;
    this.widths = widths.clone();
  }

  @Override
  public int numPartitions() {
    return partitions;
  }

  @Override
  public int getPartition(Object key) {
    throw new UnsupportedOperationException("rows of a GPU shuffle are partitioned on the device by the Slipstream"
        + " GPU writer; is spark.shuffle.manager Slipstream's?");
  }

  public int[] widths() {
    return widths.clone();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof GpuPartitioner g && g.partitions == partitions && Arrays.equals(g.widths, widths);
  }

  @Override
  public int hashCode() {
    return partitions * 31 + Arrays.hashCode(widths);
  }
}
