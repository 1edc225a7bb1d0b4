package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.loopback.LoopbackFabric;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Ten thousand fetches of several shuffles at once from holders whose writes are delayed around
 * the fetch timeout: some early, some late, some with the data on time and the table and signal
 * late. Every fetch either returns exactly its blocks or fails; no block is ever wrong, and no
 * landing byte, registration or pending request is left behind.
 */
class LandingSoakTest {
  private static final int FETCHES = 10_000;
  private static final long TIMEOUT_MS = 100;
  private static final int SHUFFLES = 4;
  private static final int HOLDERS = 3;
  private static final int READERS = 2;
  private static final int MAPS_PER_HOLDER = 2;
  private static final int PARTITIONS = 3;

  @TempDir Path tmp;

  private static Map<String, String> conf() {
    Map<String, String> m = new HashMap<>();
    m.put("spark.slipstream.landing.bytes", "1m");
    m.put("spark.slipstream.reader.maxRequestBytes", "4k");
    m.put("spark.slipstream.reader.maxBytesInFlight", "64k");
    m.put("spark.slipstream.mapOutput.memoryBytes", "4m");
    m.put("spark.slipstream.mapOutput.segmentBytes", "256k");
    m.put("spark.slipstream.mapOutput.pageBytes", "4k");
    m.put("spark.slipstream.reader.fetchTimeout", TIMEOUT_MS + "ms");
    return m;
  }

  /** A holder's delays for one request: 85% none, the rest spread over twice the timeout. */
  private static DelayingTransport.Plan plan() {
    ThreadLocalRandom r = ThreadLocalRandom.current();
    int kind = r.nextInt(20);
    long d = r.nextLong(2 * TIMEOUT_MS);
    return switch (kind) {
      case 0 -> new DelayingTransport.Plan(d, 0); // everything late, or just in time
      case 1 -> new DelayingTransport.Plan(0, d); // data on time, table and signal late
      case 2 -> new DelayingTransport.Plan(d / 2, d / 2);
      default -> DelayingTransport.Plan.NONE;
    };
  }

  private static byte[] content(int shuffle, long map, int partition) {
    Random r = new Random(shuffle * 1_000_003L + map * 101 + partition);
    byte[] b = new byte[200 + r.nextInt(5000)]; // some blocks stream in two chunks
    r.nextBytes(b);
    return b;
  }

  @Test
  void tenThousandFetchesAroundTheTimeoutReturnNoWrongBlockAndLeakNothing() throws Exception {
    TestNodes nodes = new TestNodes(new LoopbackFabric());
    List<ShuffleNode> holders = new ArrayList<>();
    List<ShuffleNode> readers = new ArrayList<>();
    Map<BlockId, byte[]> expected = new HashMap<>();
    try {
      for (int h = 0; h < HOLDERS; h++) {
        ShuffleNode n = nodes.node(conf(), tmp, "holder-" + h, t -> new DelayingTransport(t, LandingSoakTest::plan));
        holders.add(n);
        for (int s = 1; s <= SHUFFLES; s++) {
          for (int m = 0; m < MAPS_PER_HOLDER; m++) {
            long map = h * 10L + m;
            MapOutputWriter w = n.store().newOutput(s, map, PARTITIONS);
            for (int p = 0; p < PARTITIONS; p++) {
              byte[] b = content(s, map, p);
              expected.put(new BlockId(s, map, p), b);
              try (OutputStream o = w.openPartition(p)) {
                o.write(b);
              }
            }
            w.commit();
          }
        }
      }
      for (int r = 0; r < READERS; r++) {
        readers.add(nodes.node(conf(), tmp, "reader-" + r));
      }
      AtomicInteger next = new AtomicInteger();
      AtomicLong correct = new AtomicLong();
      AtomicLong failed = new AtomicLong();
      AtomicLong wrong = new AtomicLong();
      ExecutorService pool = Executors.newFixedThreadPool(24);
      List<Future<?>> workers = new ArrayList<>();
      for (int t = 0; t < 24; t++) {
        workers.add(pool.submit(() -> {
          int i;
          while ((i = next.getAndIncrement()) < FETCHES) {
            switch (fetchOnce(i, readers, holders, expected)) {
              case 0 -> correct.incrementAndGet();
              case 1 -> failed.incrementAndGet();
              default -> wrong.incrementAndGet();
            }
          }
          return null;
        }));
      }
      for (Future<?> w : workers) {
        w.get(10, TimeUnit.MINUTES);
      }
      pool.shutdown();
      assertEquals(0, wrong.get(), "wrong blocks");
      assertEquals(FETCHES, correct.get() + failed.get());
      assertTrue(failed.get() > FETCHES / 50, "enough fetches ran past the timeout to test something: " + failed);
      assertTrue(correct.get() > FETCHES / 2, "most fetches succeeded: " + correct);
      Thread.sleep(3 * TIMEOUT_MS); // the last late writes arrive (and are rejected)
      long rejected = holders.stream().mapToLong(ShuffleNode::serveFailures).sum();
      assertTrue(rejected > 0, "late writes were tried and rejected: " + rejected);
      for (ShuffleNode r : readers) {
        assertEquals(0, r.landing().used(), r.localEndpoint() + ": landing bytes");
        assertEquals(0, r.pendingRequests(), r.localEndpoint() + ": pending requests");
        assertEquals(0, r.transport().registeredRegionCount(), r.localEndpoint() + ": open registrations");
      }
      for (ShuffleNode h : holders) {
        for (int s = 1; s <= SHUFFLES; s++) {
          h.removeShuffle(s);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (h.store().memoryInUse() > 0 && System.nanoTime() < deadline) {
          Thread.sleep(10);
        }
        assertEquals(0, h.store().memoryInUse(), h.localEndpoint() + ": map output memory still pinned");
      }
    } finally {
      readers.forEach(ShuffleNode::close);
      holders.forEach(ShuffleNode::close);
    }
  }

  /** One fetch of 1 to 4 blocks of one shuffle from one or two holders: 0 correct, 1 failed, 2 a wrong block. */
  private static int fetchOnce(int i, List<ShuffleNode> readers, List<ShuffleNode> holders,
                               Map<BlockId, byte[]> expected) throws IOException {
    ThreadLocalRandom r = ThreadLocalRandom.current();
    ShuffleNode reader = readers.get(i % readers.size());
    int shuffle = 1 + r.nextInt(SHUFFLES);
    List<BlockFetcher.HolderPlan> plan = new ArrayList<>();
    int first = r.nextInt(HOLDERS);
    int count = 1 + r.nextInt(2);
    for (int k = 0; k < count; k++) {
      int h = (first + k) % HOLDERS;
      List<BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
      long map = h * 10L + r.nextInt(MAPS_PER_HOLDER);
      int from = r.nextInt(PARTITIONS);
      for (int p = from; p < Math.min(PARTITIONS, from + 2); p++) {
        BlockId id = new BlockId(shuffle, map, p);
        blocks.add(new BlockFetcher.RemoteBlock(id, expected.get(id).length));
      }
      plan.add(new BlockFetcher.HolderPlan("holder-" + h, holders.get(h).localEndpoint(), blocks));
    }
    int wanted = plan.stream().mapToInt(p -> p.blocks().size()).sum();
    int got = 0;
    try (BlockFetcher f = reader.newFetcher(shuffle, plan, FetchMetrics.NONE)) {
      while (f.hasNext()) {
        FetchedBlock b = f.next();
        byte[] bytes = LateWriteTest.readAll(b.stream());
        if (!java.util.Arrays.equals(expected.get(b.id()), bytes)) {
          return 2;
        }
        got++;
      }
    } catch (BlockFetcher.FetchFailure | BlockFetchException e) {
      return 1;
    }
    assertEquals(wanted, got);
    return 0;
  }
}
