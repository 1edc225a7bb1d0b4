package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.loopback.LoopbackFabric;
import java.io.InputStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Blocks a reduce task owns ({@link BlockFetcher#take()}, {@link BlockFetcher#poll()}): they stay
 * valid while the task fetches more, another thread may read a block that landed whole, and their
 * landing space comes back only when the task closes them.
 */
class FetcherOwnershipTest {
  @TempDir Path tmp;
  private final TestNodes nodes = new TestNodes(new LoopbackFabric());
  private final ExecutorService other = Executors.newSingleThreadExecutor();
  private ShuffleNode holder;
  private ShuffleNode reader;

  @AfterEach
  void stop() {
    other.shutdownNow();
    if (reader != null) {
      reader.close();
      holder.close();
    }
  }

  @Test
  void takenBlocksOutliveLaterFetchesAndFreeTheirSpaceWhenClosed() throws Exception {
    Map<String, String> conf = TestNodes.conf("5s");
    holder = nodes.node(conf, tmp, "holder");
    reader = nodes.node(conf, tmp, "reader");
    Random r = new Random(11);
    Map<Long, byte[]> data = new HashMap<>();
    List<BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
    for (long m = 0; m < 6; m++) {
      byte[] d = new byte[3000 + r.nextInt(3000)];
      r.nextBytes(d);
      data.put(m, d);
      MapOutputWriter w = holder.store().newOutput(1, m, 1);
      try (var o = w.openPartition(0)) {
        o.write(d);
      }
      w.commit();
      blocks.add(new BlockFetcher.RemoteBlock(new BlockId(1, m, 0), d.length));
    }
    List<FetchedBlock> held = new ArrayList<>();
    try (BlockFetcher f = reader.newFetcher(1, List.of(new BlockFetcher.HolderPlan("holder", holder.localEndpoint(),
        blocks)), FetchMetrics.NONE)) {
      f.start();
      while (f.hasNext()) {
        FetchedBlock b = held.isEmpty() ? f.take() : f.poll();
        if (b == null) {
          b = f.take(); // nothing landed yet: wait for the next one
        }
        assertNotNull(b.landedView(), "a small block lands whole");
        held.add(b);
      }
      assertEquals(6, held.size());
      assertTrue(reader.landing().used() > 0);
      // Read every held block on another thread, after all of them were fetched.
      List<Future<byte[]>> reads = new ArrayList<>();
      for (FetchedBlock b : held) {
        InputStream in = b.stream();
        reads.add(other.submit(in::readAllBytes));
      }
      for (int i = 0; i < held.size(); i++) {
        assertArrayEquals(data.get(held.get(i).id().mapId()), reads.get(i).get(), "block " + held.get(i).id());
      }
      assertFalse(f.hasNext());
    }
    assertTrue(reader.landing().used() > 0, "closing the fetcher leaves the taken blocks to their owner");
    for (FetchedBlock b : held) {
      b.stream().close();
    }
    assertEquals(0, reader.landing().used(), "all landing space is back");
  }
}
