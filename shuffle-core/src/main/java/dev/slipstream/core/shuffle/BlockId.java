package dev.slipstream.core.shuffle;

/**
 * One shuffle block: the output of map task attempt {@code mapId} (Spark's map task attempt id,
 * unique per attempt) for reduce partition {@code partition}.
 */
public record BlockId(int shuffleId, long mapId, int partition) {
  @Override
  public String toString() {
    return "shuffle_" + shuffleId + "_" + mapId + "_" + partition;
  }
}
