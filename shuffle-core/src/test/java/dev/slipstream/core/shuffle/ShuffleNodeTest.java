package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ShuffleNodeTest {
  @TempDir Path tmp;
  private final TestNodes nodes = new TestNodes(new LoopbackFabric());
  private ShuffleNode holder;
  private ShuffleNode reader;

  private ShuffleNode node(String name, Map<String, String> conf) throws TransportException {
    return nodes.node(conf, tmp, name);
  }

  private static Map<String, String> small() {
    return TestNodes.conf("5s");
  }

  @BeforeEach
  void start() throws Exception {
    holder = node("holder", small());
    reader = node("reader", small());
  }

  @AfterEach
  void stop() {
    reader.close();
    holder.close();
  }

  /** Writes a map output with random partition contents and returns them. */
  private static byte[][] writeOutput(ShuffleNode n, int shuffleId, long mapId, int[] sizes, long seed) throws IOException {
    Random r = new Random(seed);
    byte[][] data = new byte[sizes.length][];
    MapOutputWriter w = n.store().newOutput(shuffleId, mapId, sizes.length);
    for (int p = 0; p < sizes.length; p++) {
      data[p] = new byte[sizes[p]];
      r.nextBytes(data[p]);
      if (sizes[p] > 0) {
        try (OutputStream o = w.openPartition(p)) {
          o.write(data[p]);
        }
      }
    }
    w.commit();
    return data;
  }

  private Map<BlockId, byte[]> fetchAll(int shuffleId, List<BlockFetcher.RemoteBlock> blocks) throws IOException {
    Map<BlockId, byte[]> got = new HashMap<>();
    try (BlockFetcher f = reader.newFetcher(shuffleId, List.of(
        new BlockFetcher.HolderPlan("holder", holder.localEndpoint(), blocks)), FetchMetrics.NONE)) {
      while (f.hasNext()) {
        FetchedBlock b = f.next();
        got.put(b.id(), readAll(b.stream()));
      }
    }
    return got;
  }

  private static byte[] readAll(InputStream in) throws IOException {
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    byte[] buf = new byte[777];
    int n;
    while ((n = in.read(buf)) > 0) {
      o.write(buf, 0, n);
    }
    return o.toByteArray();
  }

  @Test
  void fetchesSmallAndChunkedBlocksByteExact() throws Exception {
    int[] sizes = {0, 1, 15, 4096, 16 * 1024, 16 * 1024 + 1, 100_000, 300_000};
    byte[][] data = writeOutput(holder, 3, 77L, sizes, 1);
    List<BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
    for (int p = 0; p < sizes.length; p++) {
      blocks.add(new BlockFetcher.RemoteBlock(new BlockId(3, 77L, p), sizes[p]));
    }
    Map<BlockId, byte[]> got = fetchAll(3, blocks);
    assertEquals(sizes.length - 1, got.size(), "empty blocks are skipped");
    for (int p = 1; p < sizes.length; p++) {
      assertArrayEquals(data[p], got.get(new BlockId(3, 77L, p)), "partition " + p);
    }
    assertEquals(0, reader.landing().used(), "all landing space is back");
    assertTrue(holder.requestsServed() > 0);
  }

  @Test
  void memoryThatIsNotZeroedWhenMadeStillServesExactBytes() throws Exception {
    // The executor's allocator maps its pools without zeroing them; here every fresh buffer is
    // garbage, so a signal, table or block that relied on fresh memory being zero would show.
    java.util.concurrent.atomic.AtomicInteger made = new java.util.concurrent.atomic.AtomicInteger();
    dev.slipstream.core.memory.DirectMemory dirty = bytes -> {
      made.incrementAndGet();
      java.nio.ByteBuffer b = java.nio.ByteBuffer.allocateDirect(bytes);
      for (int i = 0; i < bytes; i++) {
        b.put(i, (byte) (0xA5 ^ i));
      }
      return b;
    };
    ShuffleNode h = nodes.node(small(), tmp, "dirty-holder", t -> t, dirty);
    ShuffleNode r = nodes.node(small(), tmp, "dirty-reader", t -> t, dirty);
    try {
      int[] sizes = {1, 4096, 16 * 1024 + 3, 70_000};
      byte[][] data = writeOutput(h, 5, 9L, sizes, 3);
      List<BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
      for (int p = 0; p < sizes.length; p++) {
        blocks.add(new BlockFetcher.RemoteBlock(new BlockId(5, 9L, p), sizes[p]));
      }
      Map<BlockId, byte[]> got = new HashMap<>();
      try (BlockFetcher f = r.newFetcher(5, List.of(new BlockFetcher.HolderPlan("dirty-holder", h.localEndpoint(),
          blocks)), FetchMetrics.NONE)) {
        while (f.hasNext()) {
          FetchedBlock b = f.next();
          got.put(b.id(), readAll(b.stream()));
        }
      }
      for (int p = 0; p < sizes.length; p++) {
        assertArrayEquals(data[p], got.get(new BlockId(5, 9L, p)), "partition " + p);
      }
      assertTrue(made.get() >= 3, "both landing pools and the holder's segment came from the allocator: " + made);
    } finally {
      r.close();
      h.close();
    }
  }

  @Test
  void manyMapsFromOneHolderWithinInFlightLimit() throws Exception {
    Map<BlockId, byte[]> expected = new HashMap<>();
    List<BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
    for (long m = 0; m < 40; m++) {
      byte[][] d = writeOutput(holder, 1, m, new int[] {5000, 9000}, m);
      for (int p = 0; p < 2; p++) {
        expected.put(new BlockId(1, m, p), d[p]);
        blocks.add(new BlockFetcher.RemoteBlock(new BlockId(1, m, p), d[p].length));
      }
    }
    Map<BlockId, byte[]> got = fetchAll(1, blocks);
    assertEquals(expected.size(), got.size());
    expected.forEach((k, v) -> assertArrayEquals(v, got.get(k), k.toString()));
    assertTrue(reader.landing().peak() <= 64 * 1024 + 2 * LandingPool.UNIT, "peak " + reader.landing().peak());
  }

  @Test
  void missingMapOutputFailsTheFetchWithTheReason() throws Exception {
    writeOutput(holder, 2, 5L, new int[] {100}, 2);
    BlockFetcher.FetchFailure e = assertThrows(BlockFetcher.FetchFailure.class, () -> fetchAll(2,
        List.of(new BlockFetcher.RemoteBlock(new BlockId(2, 6L, 0), 100))));
    assertTrue(e.getMessage().contains("no map output for shuffle 2 map 6"), e.getMessage());
    assertEquals(new BlockId(2, 6L, 0), e.getCause().block());
    assertEquals(0, reader.landing().used(), "the failed request's range is free at once (its registration is revoked)");
  }

  @Test
  void approximateSizesFromMapStatusStillDeliverExactBytes() throws Exception {
    // Map statuses carry log-compressed or averaged sizes: over- and under-estimates, also
    // under-estimates of blocks that need several chunks.
    int[] sizes = {100, 5000, 40_000, 70_000};
    byte[][] data = writeOutput(holder, 2, 5L, sizes, 2);
    long[] claimed = {110, 1000, 30_000, 90_000};
    List<BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
    for (int p = 0; p < sizes.length; p++) {
      blocks.add(new BlockFetcher.RemoteBlock(new BlockId(2, 5L, p), claimed[p]));
    }
    Map<BlockId, byte[]> got = fetchAll(2, blocks);
    for (int p = 0; p < sizes.length; p++) {
      assertArrayEquals(data[p], got.get(new BlockId(2, 5L, p)), "partition " + p);
    }
    assertEquals(0, reader.landing().used());
  }

  @Test
  void blockOffsetBeyondTheBlockIsRefusedWithTheReason() throws Exception {
    writeOutput(holder, 2, 5L, new int[] {100}, 2);
    LandingPool.Range r = reader.landing().tryAllocate(4096);
    PendingRequest p = reader.send(holder.localEndpoint(), 2, r,
        List.of(new ShuffleMessages.Entry(5L, 0, 200, 100, 0)), 1024, 2048);
    java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
        () -> p.done.get(10, java.util.concurrent.TimeUnit.SECONDS));
    assertTrue(e.getCause().getMessage().contains("block offset 200 outside block shuffle_2_5_0 (length 100)"),
        e.getCause().getMessage());
    assertEquals(0, r.view(2048, 8).getLong(0), "nothing signalled");
    assertFalse(p.region.isOpen(), "the failed request's registration is revoked");
    r.free();
  }

  @Test
  void lostHolderFailsPendingFetches() throws Exception {
    writeOutput(holder, 4, 1L, new int[] {1000}, 3);
    holder.close();
    BlockFetcher.FetchFailure e = assertThrows(BlockFetcher.FetchFailure.class, () -> fetchAll(4,
        List.of(new BlockFetcher.RemoteBlock(new BlockId(4, 1L, 0), 1000))));
    TransportException cause = (TransportException) e.getCause().getCause();
    assertTrue(cause.error() == TransportError.PEER_LOST || cause.error() == TransportError.CLOSED, cause.toString());
    holder = node("holder2", small());
  }

  @Test
  void outputBeyondTheBudgetSpillsToAFileAndIsStillServed() throws Exception {
    int[] sizes = new int[8];
    java.util.Arrays.fill(sizes, 200_000);
    byte[][] data = writeOutput(holder, 9, 1L, sizes, 9); // 1.6 MB > 1 MiB budget
    assertTrue(holder.store().spills() >= 1);
    assertEquals(1, holder.store().spillFilesOnDisk());
    List<BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
    for (int p = 0; p < sizes.length; p++) {
      blocks.add(new BlockFetcher.RemoteBlock(new BlockId(9, 1L, p), sizes[p]));
    }
    Map<BlockId, byte[]> got = fetchAll(9, blocks);
    for (int p = 0; p < sizes.length; p++) {
      assertArrayEquals(data[p], got.get(new BlockId(9, 1L, p)));
    }
    holder.store().removeShuffle(9);
    // The holder releases its last reference when the acks of its writes come back.
    long deadline = System.nanoTime() + 5_000_000_000L;
    while (holder.store().spillFilesOnDisk() > 0 && System.nanoTime() < deadline) {
      Thread.onSpinWait();
    }
    assertEquals(0, holder.store().spillFilesOnDisk(), "removeShuffle deletes spill files");
    assertEquals(0, holder.store().memoryInUse());
  }

  @Test
  void partitionedWriterInterleavesPartitionsSpillsBeyondBudgetAndServesExactBytes() throws Exception {
    int parts = 12;
    ByteArrayOutputStream[] expected = new ByteArrayOutputStream[parts];
    for (int p = 0; p < parts; p++) {
      expected[p] = new ByteArrayOutputStream();
    }
    PartitionedOutputWriter w = holder.store().newPartitionedOutput(8, 3L, parts);
    Random r = new Random(8);
    // ~1.8 MB over 12 partitions against a 1 MiB budget: the partitions that run out of pages go on
    // in the output's one file, their small writes buffered and interleaved there as extents; a few
    // writes longer than the buffer go to the file as they are, and single bytes through write(int).
    for (int i = 0; i < 4000; i++) {
      int p = r.nextInt(parts - 2); // the last two partitions stay empty
      byte[] rec = new byte[i % 500 == 499 ? 40_000 : 1 + r.nextInt(800)];
      r.nextBytes(rec);
      if (i % 97 == 0) {
        w.partition(p).write(rec[0]);
        expected[p].write(rec[0]);
      }
      w.partition(p).write(rec);
      expected[p].write(rec);
    }
    MapOutput out = w.commit();
    assertTrue(holder.store().spills() >= 1, "the budget was exceeded");
    assertEquals(1, holder.store().spillFilesOnDisk(), "the partitions that spilled share one file");
    assertEquals(0, out.partitionLength(parts - 1));
    List<BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
    for (int p = 0; p < parts; p++) {
      assertEquals(expected[p].size(), out.partitionLength(p));
      blocks.add(new BlockFetcher.RemoteBlock(new BlockId(8, 3L, p), out.partitionLength(p)));
    }
    Map<BlockId, byte[]> got = fetchAll(8, blocks);
    for (int p = 0; p < parts - 2; p++) {
      assertArrayEquals(expected[p].toByteArray(), got.get(new BlockId(8, 3L, p)), "partition " + p);
      try (InputStream local = out.open(p)) {
        assertArrayEquals(expected[p].toByteArray(), readAll(local), "local read of partition " + p);
      }
    }
    holder.store().removeShuffle(8);
    long deadline = System.nanoTime() + 5_000_000_000L;
    while ((holder.store().spillFilesOnDisk() > 0 || holder.store().memoryInUse() > 0) && System.nanoTime() < deadline) {
      Thread.onSpinWait();
    }
    assertEquals(0, holder.store().spillFilesOnDisk());
    assertEquals(0, holder.store().memoryInUse());
  }

  @Test
  void encodeLanesWriteThePartitionsOfASpillingOutputConcurrentlyIntoOneFile() throws Exception {
    int parts = 16;
    ByteArrayOutputStream[] expected = new ByteArrayOutputStream[parts];
    for (int p = 0; p < parts; p++) {
      expected[p] = new ByteArrayOutputStream();
    }
    PartitionedOutputWriter w = holder.store().newPartitionedOutput(9, 4L, parts);
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(4);
    try {
      // Identity encoding: the lanes' threads write the partitions' pages and, past the 1 MiB
      // budget, append to the output's one spill file at the same time.
      EncodeLanes lanes = new EncodeLanes(pool, (p, sink) -> sink, w::partition, parts, 4096, 64 * 1024);
      Random r = new Random(21);
      for (int i = 0; i < 3000; i++) {
        int p = r.nextInt(parts);
        byte[] rec = new byte[i % 300 == 299 ? 50_000 : 1 + r.nextInt(1200)];
        r.nextBytes(rec);
        lanes.partition(p).write(rec);
        expected[p].write(rec);
      }
      lanes.finish();
    } finally {
      pool.shutdownNow();
    }
    MapOutput out = w.commit();
    assertTrue(holder.store().spills() >= 1, "the budget was exceeded");
    assertEquals(1, holder.store().spillFilesOnDisk(), "the lanes' spills share one file");
    for (int p = 0; p < parts; p++) {
      assertEquals(expected[p].size(), out.partitionLength(p));
      try (InputStream local = out.open(p)) {
        assertArrayEquals(expected[p].toByteArray(), readAll(local), "partition " + p);
      }
    }
    holder.store().removeShuffle(9);
  }

  @Test
  void concurrentWritersUnderTheBudgetSpillAndEvictAndEveryByteReadsBack() throws Exception {
    // Four map tasks at once, 24 outputs of 16 partitions (~300 KB, every sixth ~1.5 MB) against a
    // 1 MiB budget, while a reader keeps reading the outputs already committed: outputs move to files,
    // partitions spill into their output's one file, outputs being read stay; every partition must
    // read back exactly.
    int outputs = 24;
    int parts = 16;
    byte[][][] expected = new byte[outputs][][];
    ConcurrentLinkedQueue<Integer> committed = new ConcurrentLinkedQueue<>();
    ExecutorService tasks = Executors.newFixedThreadPool(4);
    AtomicBoolean writing = new AtomicBoolean(true);
    Thread reader = new Thread(() -> {
      while (writing.get()) {
        for (int m : committed) {
          MapOutput out = holder.store().retain(30, m);
          try (InputStream in = out.open(m % parts)) {
            if (!java.util.Arrays.equals(expected[m][m % parts], readAll(in))) {
              throw new AssertionError("output " + m + " partition " + (m % parts) + " read back different bytes");
            }
          } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
          } finally {
            out.release();
          }
        }
      }
    });
    AtomicReference<Throwable> readerFailure = new AtomicReference<>();
    reader.setUncaughtExceptionHandler((t, e) -> readerFailure.set(e));
    reader.start();
    try {
      List<Future<?>> fs = new ArrayList<>();
      for (int m = 0; m < outputs; m++) {
        final int map = m;
        fs.add(tasks.submit(() -> {
          Random r = new Random(map);
          ByteArrayOutputStream[] bytes = new ByteArrayOutputStream[parts];
          for (int p = 0; p < parts; p++) {
            bytes[p] = new ByteArrayOutputStream();
          }
          PartitionedOutputWriter w = holder.store().newPartitionedOutput(30, map, parts);
          int records = map % 6 == 5 ? 3000 : 600; // ~1.5 MB: beyond the budget on its own, so it spills
          for (int i = 0; i < records; i++) {
            int p = r.nextInt(parts);
            byte[] rec = new byte[1 + r.nextInt(1000)];
            r.nextBytes(rec);
            w.partition(p).write(rec);
            bytes[p].write(rec);
          }
          byte[][] got = new byte[parts][];
          for (int p = 0; p < parts; p++) {
            got[p] = bytes[p].toByteArray();
          }
          expected[map] = got;
          w.commit();
          committed.add(map);
          return null;
        }));
      }
      for (Future<?> f : fs) {
        f.get();
      }
    } finally {
      writing.set(false);
      reader.join();
      tasks.shutdownNow();
    }
    if (readerFailure.get() != null) {
      throw new AssertionError("reader failed", readerFailure.get());
    }
    assertTrue(holder.store().evictions() > 0, "committed outputs moved to files");
    assertTrue(holder.store().spills() > holder.store().evictions(), "outputs being written spilled too: "
        + holder.store().spills() + " spills, " + holder.store().evictions() + " of them moves of committed outputs");
    for (int m = 0; m < outputs; m++) {
      MapOutput out = holder.store().retain(30, m);
      try {
        for (int p = 0; p < parts; p++) {
          try (InputStream in = out.open(p)) {
            assertArrayEquals(expected[m][p], readAll(in), "output " + m + " partition " + p);
          }
        }
      } finally {
        out.release();
      }
    }
    holder.store().removeShuffle(30);
    assertEquals(0, holder.store().spillFilesOnDisk());
    assertEquals(0, holder.store().memoryInUse());
  }

  @Test
  void budgetPressureMovesTheOldestUnreadOutputToDiskNeverOneBeingRead() throws Exception {
    // Budget 1 MiB: two 600 KB outputs do not fit together.
    byte[][] a = writeOutput(holder, 20, 1L, new int[] {300_000, 300_000}, 21);
    MapOutput held = holder.store().retain(20, 1L); // a reader is reading A
    byte[][] b = writeOutput(holder, 20, 2L, new int[] {300_000, 300_000}, 22);
    assertEquals(0, holder.store().evictions(), "A is being read: B spills itself instead");
    assertTrue(holder.store().spills() >= 1);
    held.release();
    long spillsBefore = holder.store().spills();
    byte[][] c = writeOutput(holder, 21, 1L, new int[] {300_000, 300_000}, 23);
    assertEquals(1, holder.store().evictions(), "A, the oldest unread output, moved to disk to make room for C");
    MapOutput cOut = holder.store().retain(21, 1L);
    assertTrue(cOut.inMemory(), "C stayed in registered memory");
    cOut.release();
    List<BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
    for (long m : new long[] {1L, 2L}) {
      for (int p = 0; p < 2; p++) {
        blocks.add(new BlockFetcher.RemoteBlock(new BlockId(20, m, p), 300_000));
      }
    }
    Map<BlockId, byte[]> got = fetchAll(20, blocks);
    for (int p = 0; p < 2; p++) {
      assertArrayEquals(a[p], got.get(new BlockId(20, 1L, p)), "evicted A, partition " + p);
      assertArrayEquals(b[p], got.get(new BlockId(20, 2L, p)), "spilled B, partition " + p);
    }
    assertTrue(holder.store().spills() > spillsBefore);
    assertTrue(c[0].length > 0);
  }

  @Test
  void partitionedOutputOfManySmallPartitionsIsPackedIntoFewPages() throws Exception {
    int parts = 60; // 4 KiB pages: unpacked, every non-empty partition would hold its own page
    ByteArrayOutputStream[] expected = new ByteArrayOutputStream[parts];
    PartitionedOutputWriter w = holder.store().newPartitionedOutput(9, 1L, parts);
    Random r = new Random(9);
    long total = 0;
    for (int p = 0; p < parts; p++) {
      expected[p] = new ByteArrayOutputStream();
      int n = p % 7 == 3 ? 0 : p == 10 ? 9000 : 1 + r.nextInt(300); // one partition spans pages
      byte[] rec = new byte[n];
      r.nextBytes(rec);
      w.partition(p).write(rec);
      expected[p].write(rec);
      total += n;
    }
    MapOutput out = w.commit();
    long pageBytes = holder.store().pageBytes();
    assertEquals((total + pageBytes - 1) / pageBytes * pageBytes, holder.store().memoryInUse(),
        "the output holds just the pages its " + total + " bytes need");
    List<BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
    for (int p = 0; p < parts; p++) {
      assertEquals(expected[p].size(), out.partitionLength(p));
      blocks.add(new BlockFetcher.RemoteBlock(new BlockId(9, 1L, p), out.partitionLength(p)));
    }
    Map<BlockId, byte[]> got = fetchAll(9, blocks);
    for (int p = 0; p < parts; p++) {
      if (expected[p].size() > 0) {
        assertArrayEquals(expected[p].toByteArray(), got.get(new BlockId(9, 1L, p)), "partition " + p);
      }
      try (InputStream local = out.open(p)) {
        assertArrayEquals(expected[p].toByteArray(), readAll(local), "local read of partition " + p);
      }
    }
  }

  @Test
  void aSpillThatCannotCreateItsFileFailsTheWriteNamingItAndAbortFreesThePages() throws Exception {
    java.nio.file.Files.writeString(tmp.resolve("no-folder"), "a file where the spill folder should be");
    ShuffleNode blocked = node("no-folder", small());
    try {
      PartitionedOutputWriter w = blocked.store().newPartitionedOutput(8, 5L, 3);
      w.partition(1).write(new byte[300_000]);
      IOException e = assertThrows(IOException.class, () -> w.partition(0).write(new byte[900_000]));
      assertTrue(e.getMessage().startsWith("map output 8/5 needs a spill file (the map-output store's budget is"
          + " spent) and could not create one in " + tmp.resolve("no-folder")), e.getMessage());
      w.abort();
      assertEquals(0, blocked.store().memoryInUse());
      assertEquals(0, blocked.store().outputCount());
      MapOutputWriter m = blocked.store().newOutput(8, 6L, 1);
      OutputStream o = m.openPartition(0);
      assertThrows(IOException.class, () -> o.write(new byte[1_200_000]));
      m.abort();
      assertEquals(0, blocked.store().memoryInUse());
    } finally {
      blocked.close();
    }
  }

  @Test
  void abortedPartitionedOutputFreesEverything() throws Exception {
    PartitionedOutputWriter w = holder.store().newPartitionedOutput(8, 4L, 3);
    w.partition(2).write(new byte[300_000]);
    w.partition(0).write(new byte[900_000]); // beyond the budget: spills
    w.abort();
    assertEquals(0, holder.store().memoryInUse());
    assertEquals(0, holder.store().spillFilesOnDisk());
    assertEquals(0, holder.store().outputCount());
  }

  @Test
  void removeShuffleFreesPagesAndLaterRequestsFail() throws Exception {
    writeOutput(holder, 5, 1L, new int[] {10_000}, 4);
    assertTrue(holder.store().memoryInUse() > 0);
    holder.store().removeShuffle(5);
    assertEquals(0, holder.store().memoryInUse());
    assertFalse(holder.store().outputCount() > 0);
    assertThrows(BlockFetcher.FetchFailure.class, () -> fetchAll(5,
        List.of(new BlockFetcher.RemoteBlock(new BlockId(5, 1L, 0), 10_000))));
  }

  @Test
  void anOutputBegunBeforeItsShuffleWasRemovedIsDroppedAndOneBegunAfterIsKept() throws Exception {
    writeOutput(holder, 12, 1L, new int[] {10_000}, 6);
    // Map tasks of a stage Spark was cancelling as it removed the shuffle: begun before, committed after.
    MapOutputWriter zombie = holder.store().newOutput(12, 2L, 1);
    try (OutputStream o = zombie.openPartition(0)) {
      o.write(new byte[10_000]);
    }
    PartitionedOutputWriter spilling = holder.store().newPartitionedOutput(12, 3L, 2);
    spilling.partition(1).write(new byte[900_000]); // beyond the budget: a spill file
    holder.store().removeShuffle(12);
    zombie.commit();
    spilling.commit();
    assertEquals(0, holder.store().outputCount(), "nothing of the removed shuffle is held");
    assertEquals(0, holder.store().memoryInUse());
    assertEquals(0, holder.store().spillFilesOnDisk());
    // Spark registers a removed shuffle again under its id when the cleaned-up plan runs again.
    byte[][] again = writeOutput(holder, 12, 4L, new int[] {5_000, 7_000}, 9);
    assertEquals(1, holder.store().outputCount(), "an output begun after the removal is kept");
    Map<BlockId, byte[]> got = fetchAll(12, List.of(new BlockFetcher.RemoteBlock(new BlockId(12, 4L, 1), 7_000)));
    assertArrayEquals(again[1], got.get(new BlockId(12, 4L, 1)));
  }

  @Test
  void aRemovalRacingCommitsOfWritersBegunBeforeItLeavesNothingBehind() throws Exception {
    for (int shuffle = 100; shuffle < 160; shuffle++) {
      int id = shuffle;
      List<MapOutputWriter> begun = new java.util.ArrayList<>();
      for (long m = 0; m < 20; m++) {
        MapOutputWriter w = holder.store().newOutput(id, m, 3);
        try (OutputStream o = w.openPartition(0)) {
          o.write(new byte[4_000]);
        }
        begun.add(w);
      }
      java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
      java.util.concurrent.Future<?> committer = java.util.concurrent.ForkJoinPool.commonPool().submit(() -> {
        go.await();
        for (MapOutputWriter w : begun) {
          w.commit();
        }
        return null;
      });
      go.countDown();
      Thread.sleep(0, 200_000);
      holder.store().removeShuffle(id);
      committer.get();
      assertEquals(0, holder.store().outputCount(), "shuffle " + id + ": outputs committed around its removal");
      assertEquals(0, holder.store().memoryInUse(), "shuffle " + id);
    }
  }

  @Test
  void closeReleasesAllRegisteredMemory() throws Exception {
    writeOutput(holder, 6, 1L, new int[] {50_000}, 5);
    holder.close();
    assertEquals(0, holder.transport().registeredRegionCount());
    holder = node("holder3", small());
  }

  /**
   * A request of {@code from}'s into a device landing region (id 77, 1 MiB) for {@code blocks}
   * blocks of map {@code mapId}, asking for an answer when served.
   */
  static WriteRequest deviceRequest(ShuffleNode from, long mapId, int blocks) {
    RegionDescriptor landing = new RegionDescriptor(77, 0, 1 << 20, 0x5eed, MemoryKind.DEVICE, 0);
    List<ShuffleMessages.Entry> entries = new ArrayList<>();
    for (int i = 0; i < blocks; i++) {
      entries.add(new ShuffleMessages.Entry(mapId, i, 0, 256, 256L * i));
    }
    long table = 256L * blocks;
    return new WriteRequest(from.nextRequestId(), 3, from.identity(), 10_000, landing, table,
        table + BlockTable.bytes(blocks), entries, new int[] {8}, WriteRequest.ANSWER_SERVED);
  }

  @Test
  void answeredWriteRequestsGoExecutorToExecutorToTheWriterOfTheirMemoryAndEachAnswerMeetsItsRequest()
      throws Exception {
    holder.setWriter(MemoryKind.DEVICE, (to, request, received, deadline, outcome) -> {
      assertEquals(reader.localEndpoint(), to);
      long map = request.entries().get(0).mapId();
      new Thread(() -> outcome.done(map == 7 ? 0 : request.entries().size() * 10L, map == 7
          ? new TransportException(TransportError.UNKNOWN_REGION, "no such output") : null, ServeTimeline.NONE))
          .start(); // answered off the transport thread, out of order
    });
    List<java.util.concurrent.CompletableFuture<WriteResult>> sent = new ArrayList<>();
    for (int i = 1; i <= 20; i++) {
      sent.add(reader.writeExchange().send(holder.localEndpoint(), deviceRequest(reader, i, i)));
    }
    for (int i = 1; i <= 20; i++) {
      WriteResult r = sent.get(i - 1).get(10, java.util.concurrent.TimeUnit.SECONDS);
      assertEquals(i != 7, r.served(), "request " + i);
      assertEquals(i == 7 ? 0 : i * 10L, r.bytes());
      assertEquals(i == 7 ? "UNKNOWN_REGION: no such output" : "", r.reason());
    }
    assertEquals(20, reader.writeExchange().sent());
    assertEquals(19, holder.requestsServed());
    assertEquals(1, holder.serveFailures());
    assertEquals(0, reader.writeExchange().waiting());
  }

  @Test
  void aRequestThatFailsItsChecksNeverReachesTheWriterAndIsAnsweredWithTheReason() throws Exception {
    AtomicInteger reached = new AtomicInteger();
    holder.setWriter(MemoryKind.DEVICE, (to, request, received, deadline, outcome) -> {
      reached.incrementAndGet();
      outcome.done(0, null, ServeTimeline.NONE);
    });
    WriteRequest good = deviceRequest(reader, 1, 2);
    WriteRequest overlapping = new WriteRequest(reader.nextRequestId(), 3, reader.identity(), 10_000, good.landing(),
        256, good.signalOffset(), good.entries(), new int[] {8}, WriteRequest.ANSWER_SERVED);
    WriteResult r = reader.writeExchange().send(holder.localEndpoint(), overlapping)
        .get(10, java.util.concurrent.TimeUnit.SECONDS);
    assertFalse(r.served());
    assertEquals(TransportError.OUT_OF_RANGE, r.error());
    assertEquals("OUT_OF_RANGE: write request " + overlapping.requestId() + " (shuffle 3): landing ranges overlap: [256,"
        + " 512) and [256, 304), expected disjoint ranges inside region 77 (device 0, length 1048576)", r.reason());
    assertEquals(0, reached.get(), "nothing reached the writer");
    assertTrue(reader.writeExchange().send(holder.localEndpoint(), good).get(10, java.util.concurrent.TimeUnit.SECONDS)
        .served());
    assertEquals(1, reached.get());
  }

  @Test
  void answeredRequestsThroughTheHoldersRingAreAnsweredOverTheTransportAndStrangersAreDropped() throws Exception {
    List<EndpointDescriptor> froms = new java.util.concurrent.CopyOnWriteArrayList<>();
    holder.setWriter(MemoryKind.DEVICE, (to, request, received, deadline, outcome) -> {
      froms.add(to);
      outcome.done(request.entries().size(), null, ServeTimeline.NONE);
    });
    RequestRing ring = RequestRing.create(tmp, 4, 512, java.util.concurrent.TimeUnit.SECONDS.toNanos(1));
    java.nio.file.Path path = ring.path();
    holder.writeExchange().serveRing(ring, 1_000_000, reader.localEndpoint()::equals);
    RequestRing.Producer producer = RequestRing.open(path);
    List<java.util.concurrent.CompletableFuture<WriteResult>> sent = new ArrayList<>();
    for (int i = 1; i <= 30; i++) {
      sent.add(reader.writeExchange().send(holder.localEndpoint(), deviceRequest(reader, i, 1), producer,
          java.time.Duration.ofSeconds(10)));
    }
    // larger than a slot: over the transport
    sent.add(reader.writeExchange().send(holder.localEndpoint(), deviceRequest(reader, 31, 40), producer,
        java.time.Duration.ofSeconds(10)));
    for (int i = 0; i < sent.size(); i++) {
      WriteResult r = sent.get(i).get(10, java.util.concurrent.TimeUnit.SECONDS);
      assertTrue(r.served(), r.reason());
      assertEquals(i < 30 ? 1 : 40, r.bytes(), "request " + i);
    }
    assertEquals(31, reader.writeExchange().sent());
    long byRing = reader.writeExchange().sentByRing();
    assertTrue(byRing >= 4 && byRing <= 30, "by the ring: " + byRing + " (a full ring of 4 sends the rest by tcp)");
    assertEquals(List.of(reader.localEndpoint()), froms.stream().distinct().toList());

    // A message that claims a sender the holder does not know, and bytes that do not decode, are dropped.
    EndpointDescriptor stranger = new EndpointDescriptor("loopback", "elsewhere:1", new byte[0]);
    assertTrue(producer.offer(WriteExchange.ringMessage(stranger, deviceRequest(reader, 99, 1).toBytes())));
    assertTrue(producer.offer(new byte[] {1, 2, 3}));
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (holder.writeExchange().ringDropped() < 2 && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    assertEquals(2, holder.writeExchange().ringDropped());
    assertEquals(31, froms.size(), "the dropped ones reached no writer");
    holder.close();
    deadline = System.nanoTime() + 10_000_000_000L;
    while (java.nio.file.Files.exists(path) && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    assertFalse(java.nio.file.Files.exists(path), "the ring's file goes with the holder");
    holder = node("holder4", small());
  }

  @Test
  void requestsIntoMemoryWithoutAWriterAreRefusedAndUnansweredOnesFailOnce() throws Exception {
    WriteRequest first = deviceRequest(reader, 1, 1);
    WriteResult r = reader.writeExchange().send(holder.localEndpoint(), first)
        .get(10, java.util.concurrent.TimeUnit.SECONDS);
    assertFalse(r.served());
    assertEquals(TransportError.UNAVAILABLE, r.error());
    assertEquals("UNAVAILABLE: executor holder writes into no DEVICE landing regions (no block writer for that"
        + " memory here)", r.reason());
    holder.setWriter(MemoryKind.DEVICE, (to, request, received, deadline, outcome) -> { }); // never answers
    var lost = reader.writeExchange().send(holder.localEndpoint(), deviceRequest(reader, 2, 1));
    reader.peerLost(holder.localEndpoint(), "executor lost");
    var e = assertThrows(java.util.concurrent.ExecutionException.class, () -> lost.get(10,
        java.util.concurrent.TimeUnit.SECONDS));
    assertEquals(TransportError.PEER_LOST, ((TransportException) e.getCause()).error());
    Map<String, String> quick = small();
    quick.put("spark.slipstream.reader.fetchTimeout", "200ms");
    try (ShuffleNode impatient = node("impatient", quick)) {
      WriteRequest slow = deviceRequest(impatient, 3, 1);
      var late = impatient.writeExchange().send(holder.localEndpoint(), slow);
      e = assertThrows(java.util.concurrent.ExecutionException.class, () -> late.get(10,
          java.util.concurrent.TimeUnit.SECONDS));
      assertEquals(TransportError.TIMEOUT, ((TransportException) e.getCause()).error());
      assertTrue(e.getCause().getMessage().contains("did not answer write request " + slow.requestId()
          + " within 200 ms"), e.getCause().getMessage());
      var closing = impatient.writeExchange().send(holder.localEndpoint(), deviceRequest(impatient, 4, 1));
      impatient.close();
      e = assertThrows(java.util.concurrent.ExecutionException.class, () -> closing.get(10,
          java.util.concurrent.TimeUnit.SECONDS));
      assertEquals(TransportError.CLOSED, ((TransportException) e.getCause()).error());
    }
    assertThrows(IllegalArgumentException.class, () -> reader.writeExchange().send(holder.localEndpoint(),
        new WriteRequest(reader.nextRequestId(), 3, reader.identity(), 1000, first.landing(), first.tableOffset(),
            first.signalOffset(), first.entries())), "a request that is not answered when served has no answer to wait for");
  }

  @Test
  void writeMessagesRoundTripAndForgedOnesAreRejected() throws Exception {
    WriteRequest q = deviceRequest(reader, 5, 3);
    assertEquals(q, ShuffleMessages.decode(q.encode()));
    assertEquals(q, ShuffleMessages.decodeRequest(q.toBytes()));
    var r = WriteResult.failed(9, TransportError.OUT_OF_RANGE, "refused: widths");
    assertEquals(r, ShuffleMessages.decode(r.encode()));
    java.nio.ByteBuffer forged = new WriteResult(9, null, 5, "", ServeTimeline.NONE).encode();
    forged.putInt(forged.position() + 4 + 8, TransportError.BAD_KEY.code()); // an error, with bytes written
    var e = assertThrows(TransportException.class, () -> ShuffleMessages.decode(forged));
    assertEquals("MALFORMED: write result of request 9: 5 bytes written with error code 2, expected >= 0, and 0 with"
        + " an error", e.getMessage());
    java.nio.ByteBuffer flagged = q.encode();
    int flagsAt = flagged.position() + 4 + 8 + 4 + 4 + q.reader().applicationId().length() + 4
        + q.reader().executorId().length() + 8;
    flagged.putInt(flagsAt, 6);
    e = assertThrows(TransportException.class, () -> ShuffleMessages.decode(flagged));
    assertEquals("MALFORMED: write request " + q.requestId() + ": flags 0x6, expected only 0x1 (answer when served)",
        e.getMessage());
    for (byte retired : new byte[] {18, 19}) { // the separate device write request and its answer
      java.nio.ByteBuffer old = r.encode();
      old.put(old.position() + 3, retired);
      e = assertThrows(TransportException.class, () -> ShuffleMessages.decode(old));
      assertEquals(TransportError.UNKNOWN_TYPE, e.error(), e.getMessage());
    }
  }

  @Test
  void writeResultsCarryTheServeTimelineAndRejectOneOutOfOrder() throws Exception {
    var t = new ServeTimeline(10, 20, 30, 40, 0, 0, 70); // refused after the lane: launch and end not reached
    var r = new WriteResult(4, TransportError.UNAVAILABLE, 0, "refused", t);
    assertEquals(r, ShuffleMessages.decode(r.encode()));
    java.nio.ByteBuffer forged = new WriteResult(4, null, 8, "", new ServeTimeline(10, 20, 30, 40, 50, 60, 70))
        .encode();
    forged.putLong(forged.limit() - 8 * 2, 5); // "ended" before "launched"
    var e = assertThrows(TransportException.class, () -> ShuffleMessages.decode(forged));
    assertEquals("MALFORMED: serve timeline: ended at 5 ns, before launched at 50 ns; expected instants in order"
        + " (0: not reached)", e.getMessage());
    java.nio.ByteBuffer cut = r.encode();
    cut.limit(cut.limit() - 8);
    assertThrows(TransportException.class, () -> ShuffleMessages.decode(cut));
  }
}
