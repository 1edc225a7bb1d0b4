package dev.slipstream.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.slipstream.spark.MapBlock;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.junit.jupiter.api.Test;

class GpuRequestChunksTest {
  private static final long MB = 1L << 20;

  private static PushFetch.Holder holder(String id, long... sizes) {
    List<MapBlock> blocks = new ArrayList<>();
    for (int i = 0; i < sizes.length; i++) {
      blocks.add(new MapBlock(BlockManagerId.apply(id, "host", 7000, scala.Option.empty()), i,
          new ShuffleBlockId(3, i, 5), sizes[i]));
    }
    return new PushFetch.Holder(id, blocks);
  }

  /** Each request as the sizes of its blocks, holder first: "1:[11, 11]". */
  private static List<String> shape(List<PushFetch.Chunk> chunks) {
    return chunks.stream().map(c -> c.holder() + ":" + c.blocks().stream().map(b -> b.size() / MB).toList()).toList();
  }

  @Test
  void aHolderIsSpreadOverUpToSpreadRequestsOfWholeBlocks() {
    var h = holder("1", 11 * MB, 11 * MB, 11 * MB, 11 * MB);
    assertEquals(List.of("1:[11]", "1:[11]", "1:[11]", "1:[11]"),
        shape(PushFetch.chunks(List.of(h), 256 * MB, 4 * MB, 4)));
    assertEquals(List.of("1:[11, 11]", "1:[11, 11]"), shape(PushFetch.chunks(List.of(h), 256 * MB, 4 * MB, 2)));
    assertEquals(List.of("1:[11, 11, 11, 11]"), shape(PushFetch.chunks(List.of(h), 256 * MB, 4 * MB, 1)));
  }

  @Test
  void requestsStayAboveTheMinimumAndBelowTheMaximum() {
    var small = holder("1", 1 * MB, 1 * MB, 1 * MB, 1 * MB, 1 * MB, 1 * MB);
    assertEquals(List.of("1:[1, 1, 1, 1]", "1:[1, 1]"),
        shape(PushFetch.chunks(List.of(small), 256 * MB, 4 * MB, 4)));
    var big = holder("2", 100 * MB, 100 * MB, 100 * MB);
    // One block above the maximum goes alone; the minimum never joins blocks past the maximum.
    assertEquals(List.of("2:[100]", "2:[100]", "2:[100]"),
        shape(PushFetch.chunks(List.of(big), 150 * MB, 400 * MB, 4)));
  }

  @Test
  void holdersAreInterleaved() {
    var a = holder("1", 8 * MB, 8 * MB);
    var b = holder("2", 8 * MB, 8 * MB, 8 * MB);
    assertEquals(List.of("1:[8]", "2:[8]", "1:[8]", "2:[8]", "2:[8]"),
        shape(PushFetch.chunks(List.of(a, b), 256 * MB, 4 * MB, 4)));
  }
}
