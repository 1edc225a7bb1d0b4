package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A holder slower than the reader's fetch timeout still writes its block, table and signal after
 * the reader gave up. The reader's range is then free and reused by a fetch of another shuffle
 * from another holder. The late writes must be rejected with nothing landing, and the second
 * fetch must return its own block, unchanged while the reader holds it.
 *
 * <p>Timeline (T = the fetch timeout, 1 s): the first fetch starts at 0 and fails at T; the
 * second starts at 2.1 T (after any quarantine of one timeout would have ended too) on the same
 * range, and its holder answers 0.6 T later; the slow holder's late writes come at 2.3 T (while
 * the second fetch waits) or at 2.9 T (while its block is held, not yet read).
 */
class LateWriteTest {
  private static final long T = 1000;
  static final int SIZE = 3000;

  @TempDir Path tmp;

  private static Map<String, String> conf() {
    return TestNodes.conf(T + "ms");
  }

  static byte[] write(ShuffleNode n, int shuffleId, long mapId, long seed) throws IOException {
    byte[] data = new byte[SIZE];
    new Random(seed).nextBytes(data);
    MapOutputWriter w = n.store().newOutput(shuffleId, mapId, 1);
    try (OutputStream o = w.openPartition(0)) {
      o.write(data);
    }
    w.commit();
    return data;
  }

  static byte[] readAll(InputStream in) throws IOException {
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    in.transferTo(o);
    return o.toByteArray();
  }

  private static void sleepUntil(long t0, long atMillis) throws InterruptedException {
    long left = atMillis - (System.nanoTime() - t0) / 1_000_000;
    if (left > 0) {
      Thread.sleep(left);
    }
  }

  /**
   * @param slow the slow holder's plan for its one request
   * @param readAt when to read the second block (ms after the start; 0: as soon as it is handed out)
   */
  private void secondFetchGetsItsOwnBlock(String transport, DelayingTransport.Plan slow, long readAt) throws Exception {
    TestNodes nodes = new TestNodes(transport);
    AtomicReference<DelayingTransport.Plan> fastPlan = new AtomicReference<>(new DelayingTransport.Plan(6 * T / 10, 0));
    try (ShuffleNode reader = nodes.node(conf(), tmp, "reader");
         ShuffleNode slowHolder = nodes.node(conf(), tmp, "slow", t -> new DelayingTransport(t, () -> slow));
         ShuffleNode holder = nodes.node(conf(), tmp, "holder", t -> new DelayingTransport(t, fastPlan::get))) {
      write(slowHolder, 1, 7L, 1);
      byte[] second = write(holder, 2, 7L, 2);
      long t0 = System.nanoTime();
      try (BlockFetcher f = reader.newFetcher(1, List.of(new BlockFetcher.HolderPlan("slow", slowHolder.localEndpoint(),
          List.of(new BlockFetcher.RemoteBlock(new BlockId(1, 7L, 0), SIZE)))), FetchMetrics.NONE)) {
        BlockFetcher.FetchFailure e = assertThrows(BlockFetcher.FetchFailure.class, f::next);
        assertEquals(TransportError.TIMEOUT, ((TransportException) e.getCause().getCause()).error(), e.getMessage());
      }
      assertEquals(0, reader.landing().used(), "the timed-out request's range is free");
      sleepUntil(t0, 21 * T / 10);
      try (BlockFetcher f = reader.newFetcher(2, List.of(new BlockFetcher.HolderPlan("holder", holder.localEndpoint(),
          List.of(new BlockFetcher.RemoteBlock(new BlockId(2, 7L, 0), SIZE)))), FetchMetrics.NONE)) {
        FetchedBlock b = f.next();
        assertEquals(new BlockId(2, 7L, 0), b.id());
        byte[] got = readAt == 0 ? readAll(b.stream()) : null;
        sleepUntil(t0, readAt);
        // The slow holder has tried its late writes by now: each one was rejected.
        long deadline = System.nanoTime() + 10 * T * 1_000_000;
        while (slowHolder.serveFailures() == 0 && System.nanoTime() < deadline) {
          Thread.sleep(10);
        }
        assertEquals(1, slowHolder.serveFailures(), "the late writes were rejected at the reader");
        assertArrayEquals(second, got != null ? got : readAll(b.stream()),
            "the second fetch returns its own block, unchanged");
      }
      assertEquals(0, reader.checksumRetries(), "no late byte reached the reader's memory");
      assertEquals(0, reader.landing().used());
      assertEquals(0, reader.pendingRequests());
      assertEquals(0, reader.transport().registeredRegionCount(), "every request's registration is revoked");
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"loopback", "tcp"})
  void aLateBlockTableAndSignalCannotCompleteTheFetchThatReusedTheRange(String transport) throws Exception {
    secondFetchGetsItsOwnBlock(transport, new DelayingTransport.Plan(23 * T / 10, 0), 0);
  }

  @ParameterizedTest
  @ValueSource(strings = {"loopback", "tcp"})
  void aLateTableAndSignalAfterDataOnTimeCannotCompleteTheFetchThatReusedTheRange(String transport) throws Exception {
    // The data lands on time in the first request's range (which is never handed out), the table and
    // signal come late: before the second holder has written anything into the reused range.
    secondFetchGetsItsOwnBlock(transport, new DelayingTransport.Plan(0, 23 * T / 10), 0);
  }

  @ParameterizedTest
  @ValueSource(strings = {"loopback", "tcp"})
  void aLateWriteCannotChangeABlockTheReaderHolds(String transport) throws Exception {
    // The second block landed and passed its checksum at 2.7 T; the late write comes at 2.9 T.
    secondFetchGetsItsOwnBlock(transport, new DelayingTransport.Plan(29 * T / 10, 0), 32 * T / 10);
  }
}
