package dev.slipstream.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.stream.Collectors;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.junit.jupiter.api.Test;
import scala.Option;

/** How the reader groups the tracker's blocks into batch blocks when Spark asks for batch fetch. */
class ReaderBatchesTest {
  private static final BlockManagerId REMOTE = BlockManagerId.apply("1", "host-a", 7001, Option.empty());
  private static final BlockManagerId LOCAL = BlockManagerId.apply("2", "host-b", 7002, Option.empty());

  private static MapBlock block(BlockManagerId at, long mapId, int reduceId, long size) {
    return new MapBlock(at, (int) mapId, new ShuffleBlockId(0, mapId, reduceId), size);
  }

  /** Each batch as "map:first-last". */
  private static List<String> names(List<List<MapBlock>> batches) {
    return batches.stream().map(g -> g.get(0).id().mapId() + ":" + g.get(0).id().reduceId() + "-"
        + g.get(g.size() - 1).id().reduceId()).collect(Collectors.toList());
  }

  private static final List<MapBlock> BLOCKS = List.of(
      block(REMOTE, 10, 2, 100), block(REMOTE, 10, 3, 100), block(REMOTE, 10, 5, 100), // 4 is empty
      block(REMOTE, 11, 2, 100),
      block(LOCAL, 12, 2, 900), block(LOCAL, 12, 3, 900), block(LOCAL, 12, 6, 900));

  @Test
  void aMapOutputsBlocksOnOneExecutorMakeOneBatchAcrossEmptyPartitions() {
    assertEquals(List.of("10:2-5", "11:2-2", "12:2-6"), names(SlipstreamShuffleReader.batches(BLOCKS, "2", 1 << 20)));
  }

  @Test
  void remoteBatchesAreCutAtTheRequestSizeLocalOnesAreNot() {
    assertEquals(List.of("10:2-3", "10:5-5", "11:2-2", "12:2-6"),
        names(SlipstreamShuffleReader.batches(BLOCKS, "2", 250)));
    // A block larger than a request stays one block (it is streamed).
    assertEquals(List.of("10:2-2", "10:3-3", "10:5-5", "11:2-2", "12:2-6"),
        names(SlipstreamShuffleReader.batches(BLOCKS, "2", 50)));
  }

  @Test
  void aRemoteBatchSpansAtMostTheTableRecordsOfOneRequest() {
    int max = dev.slipstream.core.shuffle.ShuffleMessages.MAX_TABLE_RECORDS;
    List<MapBlock> wide = List.of(block(REMOTE, 10, 0, 1), block(REMOTE, 10, max - 1, 1), block(REMOTE, 10, max, 1),
        block(LOCAL, 12, 0, 1), block(LOCAL, 12, max, 1));
    assertEquals(List.of("10:0-" + (max - 1), "10:" + max + "-" + max, "12:0-" + max),
        names(SlipstreamShuffleReader.batches(wide, "2", 1 << 20)));
  }

  @Test
  void theSameMapIndexOnAnotherExecutorIsAnotherBatch() {
    List<MapBlock> moved = List.of(block(REMOTE, 10, 2, 100), block(LOCAL, 10, 3, 100));
    assertEquals(List.of("10:2-2", "10:3-3"), names(SlipstreamShuffleReader.batches(moved, "2", 1 << 20)));
  }
}
