package dev.slipstream.core.shuffle;

/**
 * The bytes of reduce partitions {@code [partition, endPartition)} in the output of map task
 * attempt {@code mapId} (Spark's map task attempt id, unique per attempt). One partition is a
 * single shuffle block; more are a batch block, Spark's {@code ShuffleBlockBatchId}: the
 * partitions lie one after another in the map output, so their bytes move as one block.
 */
public record BlockId(int shuffleId, long mapId, int partition, int endPartition) {
  public BlockId {
    if (endPartition <= partition) {
      throw new IllegalArgumentException("block of shuffle " + shuffleId + " map " + mapId + ": partitions ["
          + partition + ", " + endPartition + "), expected at least one");
    }
  }

  /** The single block of {@code partition}. */
  public BlockId(int shuffleId, long mapId, int partition) {
    this(shuffleId, mapId, partition, partition + 1);
  }

  /** Number of reduce partitions this block covers. */
  public int partitions() {
    return endPartition - partition;
  }

  public boolean isBatch() {
    return endPartition - partition > 1;
  }

  /** Spark's names: {@code shuffle_S_M_R} for a single block, {@code shuffle_S_M_R_E} for a batch. */
  @Override
  public String toString() {
    return "shuffle_" + shuffleId + "_" + mapId + "_" + partition + (isBatch() ? "_" + endPartition : "");
  }
}
