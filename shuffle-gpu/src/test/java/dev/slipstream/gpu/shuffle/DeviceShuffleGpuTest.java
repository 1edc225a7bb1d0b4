package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.slipstream.core.memory.MemoryPool;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.DeviceBuffer;
import dev.slipstream.gpu.Backend;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuProbe;
import dev.slipstream.gpu.GpuRuntime;
import dev.slipstream.gpu.PartitionKernel;
import dev.slipstream.gpu.PushKernel;
import dev.slipstream.gpu.RemoteRegion;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The GPU shuffle's data path on one GPU, without Spark: map batches partitioned by the shipped
 * partition kernel into the device map-output store, then pushed by the push kernel into a landing
 * region (an alias of this process's own: the cross-process CUDA IPC import is PeerPushGpuTest's),
 * read back as device batches and compared row by row with a CPU reference of the partition
 * function. Also: a refused request writes nothing, and an output spilled to host memory comes back
 * byte-exact.
 */
class DeviceShuffleGpuTest {
  private static final int[] W = {8, 4};
  private static final int PARTS = 16;

  private static void assumeGpu() {
    GpuProbe p = GpuRuntime.probe();
    assumeTrue(p.available(), p.reason());
  }

  /** Rows [from, from + n): key (negative and repeated keys too), col0 = key * 3, col1 = row index. */
  private static byte[] rows(long from, int n) {
    BatchLayout l = BatchLayout.packed(n, W);
    ByteBuffer b = ByteBuffer.allocate((int) l.bufferBytes()).order(ByteOrder.LITTLE_ENDIAN);
    SplittableRandom r = new SplittableRandom(42 + from);
    for (int i = 0; i < n; i++) {
      long key = r.nextLong(-1_000_000, 1_000_000);
      b.putLong(8 * i, key);
      b.putLong((int) l.offset(0) + 8 * i, key * 3);
      b.putInt((int) l.offset(1) + 4 * i, (int) (from + i));
    }
    return b.array();
  }

  private static DeviceBatch upload(GpuContext ctx, byte[] packed, int n) {
    BatchLayout l = BatchLayout.packed(n, W);
    DeviceBuffer d = ctx.allocate(Math.max(16, packed.length));
    d.write(0, packed);
    return DeviceBatch.owning(ctx.device(), d.address(), l, d);
  }

  /** Decodes a packed block into row index -> key, checking col0 and the partition of every key. */
  private static void collect(byte[] block, long n, int partition, Map<Integer, Long> into) {
    BatchLayout l = BatchLayout.packed(n, W);
    ByteBuffer b = ByteBuffer.wrap(block).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < n; i++) {
      long key = b.getLong(8 * i);
      assertEquals(key * 3, b.getLong((int) l.offset(0) + 8 * i), "col0 of row with key " + key);
      assertEquals(partition, PartitionKernel.partitionOf(key, PARTS), "partition of key " + key);
      int row = b.getInt((int) l.offset(1) + 4 * i);
      assertEquals(null, into.put(row, key), "row " + row + " twice");
    }
  }

  private static Map<Integer, Long> reference(long from, int n) {
    ByteBuffer b = ByteBuffer.wrap(rows(from, n)).order(ByteOrder.LITTLE_ENDIAN);
    Map<Integer, Long> m = new HashMap<>();
    for (int i = 0; i < n; i++) {
      m.put((int) (from + i), b.getLong(8 * i));
    }
    return m;
  }

  @Test
  void mapOutputsPartitionedOnTheDeviceArePushedIntoTheLandingRegionByteExact() throws TransportException {
    assumeGpu();
    int n1 = 100_003;
    int n2a = 40_000;
    int n2b = 25_001;
    try (GpuContext ctx = GpuContext.open(0);
        PushKernel kernel = PushKernel.load(ctx);
        DeviceMapOutputStore store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, 1000), 64L << 20, 0);
        DeviceLanding landing = new DeviceLanding(ctx, 32L << 20, 1);
        RemoteRegion landingView = RemoteRegion.alias(landing.region())) {
      long[][] out1;
      long[][] out2;
      try (DeviceBatch b1 = upload(ctx, rows(0, n1), n1);
          DeviceBatch b2a = upload(ctx, rows(n1, n2a), n2a);
          DeviceBatch b2b = upload(ctx, rows(n1 + n2a, n2b), n2b)) {
        out1 = DeviceMapOutputWriter.write(ctx, store, 7, 1, List.of(b1), PARTS, W, 30_000);
        out2 = DeviceMapOutputWriter.write(ctx, store, 7, 2, List.of(b2a, b2b), PARTS, W, 30_000); // concatenated
      }
      // The store's sections: every row once, in the partition the CPU reference computes.
      Map<Integer, Long> got1 = new HashMap<>();
      Map<Integer, Long> got2 = new HashMap<>();
      List<byte[]> sections = new ArrayList<>();
      for (long map : new long[] {1, 2}) {
        try (DeviceMapOutputStore.Pinned p = store.pin(7, map)) {
          for (int q = 0; q < PARTS; q++) {
            byte[] s = new byte[(int) p.bytes(q)];
            p.block().read(p.offset(q), s, 0, s.length);
            assertEquals(BatchLayout.packedBytes(p.rows(q), W), s.length, "section " + q + " of map " + map);
            collect(s, p.rows(q), q, map == 1 ? got1 : got2);
            sections.add(s);
            assertEquals((map == 1 ? out1 : out2)[0][q], s.length);
          }
        }
      }
      assertEquals(reference(0, n1), got1);
      Map<Integer, Long> ref2 = reference(n1, n2a);
      ref2.putAll(reference(n1 + n2a, n2b));
      assertEquals(ref2, got2);

      // Push every block of both maps in one request; compare the landed batches with the sections.
      // The lanes' block-table regions are device memory in the accounting tree.
      MemoryPool tables = MemoryPool.root("push-tables", Long.MAX_VALUE);
      PushScheduler server = new PushScheduler(ctx, kernel, store, d -> landingView, 1 << 20, 1,
          new PushScheduler.Lanes(Backend.NVLINK, PushLane.MAX_DATA_QUEUES, PushLane.THREADS, tables));
      List<DeviceLanding.Want> wants = new ArrayList<>();
      for (long map : new long[] {1, 2}) {
        for (int q = 0; q < PARTS; q++) {
          wants.add(new DeviceLanding.Want(map, q, (map == 1 ? out1 : out2)[0][q]));
        }
      }
      try (DeviceLanding.Fetch f = landing.prepare(7, W, wants)) {
        long bytes = server.serve(ShuffleMessages.decodeRequest(f.request().toBytes()), 30_000);
        List<DeviceBatch> landed = f.await(System.nanoTime() + 30_000_000_000L);
        assertEquals(2 * PARTS, landed.size());
        long total = 0;
        for (int i = 0; i < landed.size(); i++) {
          DeviceBatch b = landed.get(i);
          long off = b.address() - landing.region().devicePointer();
          assertArrayEquals(sections.get(i), landing.region().read(off, (int) b.layout().bufferBytes()),
              "landed block " + i);
          total += b.layout().bufferBytes();
        }
        assertEquals(total, bytes);
      }
      assertEquals(0, landing.used());

      // Refused: a block larger than its capacity, or an output that is not here; nothing lands.
      landing.region().fill((byte) 0);
      try (DeviceLanding.Fetch f = landing.prepare(7, W, List.of(new DeviceLanding.Want(1, 3, out1[0][3] - 16)))) {
        var e = assertThrows(TransportException.class, () -> server.serve(f.request(), 30_000));
        assertTrue(e.getMessage().contains("has " + out1[0][3] + " bytes, more than its capacity"), e.getMessage());
        var t = assertThrows(TransportException.class, () -> f.await(System.nanoTime() + 50_000_000L));
        assertTrue(t.getMessage().contains("signal at 0 of 2 blocks by the deadline"), t.getMessage());
        assertArrayEquals(new byte[64], landing.region().read(f.request().entries().get(0).landingOffset(), 64));
      }
      try (DeviceLanding.Fetch f = landing.prepare(7, W, List.of(new DeviceLanding.Want(99, 0, 1024)))) {
        var e = assertThrows(TransportException.class, () -> server.serve(f.request(), 30_000));
        assertTrue(e.getMessage().contains("no device map output for shuffle 7 map attempt 99"), e.getMessage());
      }
      try (DeviceLanding.Fetch f = landing.prepare(7, new int[] {8}, List.of(new DeviceLanding.Want(1, 0, 1 << 20)))) {
        var e = assertThrows(TransportException.class, () -> server.serve(f.request(), 30_000));
        assertTrue(e.getMessage().contains("has payload widths [8, 4], the request expects [8]"), e.getMessage());
      }
      assertEquals(1, server.lanesMade(), "one push lane for the one landing region");
      assertTrue(tables.used() >= 4096, "the lane's table region is accounted: " + tables);
      server.close();
      assertEquals(0, tables.used(), "released with the lanes: " + tables);
      tables.close();
      assertEquals(2, store.removeShuffle(7));
      assertEquals(0, store.deviceInUse());
    }
  }

  /** Pushes every block of {@code maps} in one request and compares each landed block with the store's section. */
  private static void pushAll(PushScheduler server, DeviceLanding landing, DeviceMapOutputStore store, long... maps)
      throws TransportException {
    List<DeviceLanding.Want> wants = new ArrayList<>();
    List<byte[]> sections = expect(store, wants, maps);
    try (DeviceLanding.Fetch f = landing.prepare(3, W, wants)) {
      server.serve(ShuffleMessages.decodeRequest(f.request().toBytes()), 30_000);
      checkLanded(landing, f, sections, maps);
    }
  }

  /** Every partition of {@code maps} (shuffle 3) as wanted blocks, and their bytes as the store holds them. */
  private static List<byte[]> expect(DeviceMapOutputStore store, List<DeviceLanding.Want> wants, long... maps) {
    List<byte[]> sections = new ArrayList<>();
    for (long map : maps) {
      try (DeviceMapOutputStore.Pinned p = store.pin(3, map)) {
        for (int q = 0; q < PARTS; q++) {
          byte[] b = new byte[(int) p.bytes(q)];
          p.block().read(p.offset(q), b, 0, b.length);
          sections.add(b);
          wants.add(new DeviceLanding.Want(map, q, b.length));
        }
      }
    }
    return sections;
  }

  /** Waits for {@code f}'s signal and compares each landed block with its expected bytes. */
  private static void checkLanded(DeviceLanding landing, DeviceLanding.Fetch f, List<byte[]> sections, long... maps)
      throws TransportException {
    List<DeviceBatch> landed = f.await(System.nanoTime() + 30_000_000_000L);
    assertEquals(sections.size(), landed.size());
    for (int i = 0; i < landed.size(); i++) {
      long off = landed.get(i).address() - landing.region().devicePointer();
      assertArrayEquals(sections.get(i), landing.region().read(off, sections.get(i).length),
          "maps " + java.util.Arrays.toString(maps) + ", landed block " + i);
    }
  }

  /** Maps 1..count of shuffle 3, n rows each, partitioned into the store. */
  private static void writeMaps(GpuContext ctx, DeviceMapOutputStore store, int count, int n) {
    for (long map = 1; map <= count; map++) {
      try (DeviceBatch b = upload(ctx, rows(map * n, n), n)) {
        DeviceMapOutputWriter.write(ctx, store, 3, map, List.of(b), PARTS, W, 30_000);
      }
    }
  }

  /** A GPU with the push kernel, maps 1..6 of shuffle 3 (20,000 rows each) in a store, a landing region and a server. */
  private static final class Rig implements AutoCloseable {
    final GpuContext ctx = GpuContext.open(0);
    final PushKernel kernel = PushKernel.load(ctx);
    final DeviceMapOutputStore store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, 3000), 64L << 20, 0);
    final DeviceLanding landing = new DeviceLanding(ctx, 64L << 20, 1);
    final RemoteRegion view = RemoteRegion.alias(landing.region());
    final PushScheduler server;

    Rig(int inFlight) {
      server = new PushScheduler(ctx, kernel, store, d -> view, 1 << 20, inFlight);
      writeMaps(ctx, store, 6, 20_000);
    }

    void pushAll(long... maps) throws TransportException {
      DeviceShuffleGpuTest.pushAll(server, landing, store, maps);
    }

    @Override
    public void close() {
      for (AutoCloseable c : new AutoCloseable[] {server, view, landing, store, kernel, ctx}) {
        try {
          c.close();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
    }
  }

  @Test
  void onePushLanePerLandingRegionServesRequestsOverChangingMapOutputsUntilItIsRevoked() throws TransportException {
    assumeGpu();
    try (Rig r = new Rig(1)) {
      r.pushAll(1, 2);
      r.pushAll(6, 5, 4, 3, 2, 1); // more outputs than the lane's first 4 slots
      r.pushAll(3);
      r.pushAll(2, 4);
      assertEquals(1, r.server.lanesMade(), "requests one at a time into one landing region share one lane");
      assertEquals(1, r.server.lanesIdle());
      assertEquals(4, r.server.requestsServed());
      r.server.forget(r.landing.export().descriptor());
      assertEquals(0, r.server.lanesIdle(), "a forgotten landing region's lanes are closed");
      // Forgotten means its reader was lost: the region is revoked, never pushed into again.
      TransportException e = assertThrows(TransportException.class, () -> r.pushAll(5));
      assertTrue(e.getMessage().contains("its reader's landing region was revoked"), e.getMessage());
      assertEquals(1, r.server.lanesMade(), "no lane is made into a revoked landing region");
      assertEquals(0, r.landing.used());
    }
  }

  @Test
  void requestsFromSeveralThreadsPushConcurrentlyWithinTheBoundByteExact() throws Exception {
    assumeGpu();
    try (Rig r = new Rig(2)) {
      java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(6);
      try {
        List<java.util.concurrent.Future<?>> done = new ArrayList<>();
        for (int t = 0; t < 6; t++) {
          long first = t + 1;
          done.add(pool.submit(() -> {
            r.ctx.makeCurrent();
            for (int round = 0; round < 5; round++) {
              r.pushAll(first, 7 - first);
            }
            return null;
          }));
        }
        for (java.util.concurrent.Future<?> f : done) {
          f.get(120, java.util.concurrent.TimeUnit.SECONDS); // rethrows a thread's failed byte check
        }
      } finally {
        pool.shutdownNow();
      }
      assertEquals(30, r.server.requestsServed());
      assertTrue(r.server.peakInFlight() >= 1 && r.server.peakInFlight() <= 2, "peak " + r.server.peakInFlight());
      assertTrue(r.server.lanesMade() <= 2, "lanes made " + r.server.lanesMade() + ", expected at most the bound 2");
      assertEquals(0, r.landing.used());
    }
  }

  @Test
  void requestsPreparedTogetherStopAtTheFirstThatDoesNotFitAndLandOnZeroedSignals() throws TransportException {
    assumeGpu();
    try (Rig r = new Rig(2)) {
      r.pushAll(1, 2); // lands at offset 0 and leaves its signal word counted there
      List<DeviceLanding.Want> first = new ArrayList<>();
      List<byte[]> sections = expect(r.store, first, 1, 2);
      List<DeviceLanding.Want> tooLarge = List.of(new DeviceLanding.Want(3, 0, r.landing.capacity()));
      List<DeviceLanding.Want> third = new ArrayList<>();
      expect(r.store, third, 3);
      List<DeviceLanding.Fetch> fs = r.landing.tryPrepareAll(3, W, List.of(first, tooLarge, third));
      try {
        assertEquals(1, fs.size(), "the second does not fit the region, and the third is not laid out past it");
        DeviceLanding.Fetch f = fs.get(0);
        assertEquals(f.length(), r.landing.used());
        r.server.serve(ShuffleMessages.decodeRequest(f.request().toBytes()), 30_000);
        // Same layout at the same offset as the first push: had the range not been zeroed when it was
        // released, the signal would count twice.
        checkLanded(r.landing, f, sections, 1, 2);
      } finally {
        fs.forEach(DeviceLanding.Fetch::close);
      }
      assertEquals(0, r.landing.used());
      assertEquals(List.of(), r.landing.tryPrepareAll(3, W, List.of(tooLarge, first)),
          "nothing is laid out when the first does not fit");
      assertEquals(0, r.landing.used());
    }
  }

  @Test
  void aTimedOutPushIsSetAsideAndAnsweredOnlyOnceItsLaneIsIdle() throws Exception {
    assumeGpu();
    try (Rig r = new Rig(2)) {
      r.pushAll(4, 5, 6); // makes the lane the request below takes, at its size: no allocation while the GPU is full
      List<DeviceLanding.Want> wants = new ArrayList<>();
      expect(r.store, wants, 4, 5, 6);
      DeviceLanding.Fetch f = r.landing.prepare(3, W, wants);
      // Fill every SM with waiting threads (more blocks than fit at once, each waiting 400 ms for a
      // signal that never comes), so the push below, launched at once, cannot end within its 50 ms.
      int waiters = 300_000;
      long[] never = new long[waiters];
      java.util.Arrays.fill(never, 1);
      try (DeviceBuffer words = r.ctx.allocate(8L * waiters)) {
        words.fill((byte) 0);
        Thread filler = new Thread(() -> {
          r.ctx.makeCurrent();
          r.kernel.waitSignals(words.address(), never, 400_000_000L, 30_000);
        }, "gpu-filler");
        filler.start();
        Thread.sleep(100);
        var outcome = new java.util.concurrent.CompletableFuture<TransportException>();
        r.server.start(ShuffleMessages.decodeRequest(f.request().toBytes()), 50, new long[PushScheduler.MARKS],
            (bytes, error) -> outcome.complete(error));
        Thread.sleep(150);
        assertEquals(1, r.server.lanesAside(), "the timed-out push's lane is set aside while its kernel may run");
        assertTrue(!outcome.isDone(), "and its request is not answered while its kernel may store");
        TransportException e = outcome.get(60, java.util.concurrent.TimeUnit.SECONDS);
        assertTrue(e != null && e.getMessage().contains("still running after 50 ms"), String.valueOf(e));
        assertEquals(0, r.server.lanesAside(), "answered only once the lane's stream was idle and the lane closed");
        assertEquals(1, r.server.lanesReclaimed());
        filler.join(30_000);
      }
      f.close(); // answered: its push has ended, nothing writes there any more
      r.pushAll(1, 2); // the server goes on with its other lane or a fresh one
      assertEquals(0, r.landing.used());
    }
  }

  @Test
  void requestsStartedBeyondTheBoundFromOneThreadWaitForALaneAndAllLandByteExact() throws Exception {
    assumeGpu();
    long[][] plans = {{1, 2}, {3}, {4, 5, 6}, {2}, {6, 1}, {5}, {3, 4}, {1}};
    try (Rig r = new Rig(2)) {
      List<DeviceLanding.Fetch> fetches = new ArrayList<>();
      List<List<byte[]>> expected = new ArrayList<>();
      List<java.util.concurrent.CompletableFuture<Long>> outcomes = new ArrayList<>();
      List<long[]> marks = new ArrayList<>();
      try {
        for (long[] maps : plans) {
          List<DeviceLanding.Want> wants = new ArrayList<>();
          expected.add(expect(r.store, wants, maps));
          DeviceLanding.Fetch f = r.landing.prepare(3, W, wants);
          fetches.add(f);
          var outcome = new java.util.concurrent.CompletableFuture<Long>();
          long[] m = new long[PushScheduler.MARKS];
          // start() returns without waiting for the push: all 8 are started before any is awaited.
          r.server.start(ShuffleMessages.decodeRequest(f.request().toBytes()), 30_000, m, (bytes, error) -> {
            if (error == null) {
              outcome.complete(bytes);
            } else {
              outcome.completeExceptionally(error);
            }
          });
          outcomes.add(outcome);
          marks.add(m);
        }
        for (int i = 0; i < plans.length; i++) {
          long want = expected.get(i).stream().mapToLong(b -> b.length).sum();
          assertEquals(want, outcomes.get(i).get(60, java.util.concurrent.TimeUnit.SECONDS), "request " + i);
          checkLanded(r.landing, fetches.get(i), expected.get(i), plans[i]);
          long[] m = marks.get(i);
          assertTrue(m[PushScheduler.MARK_CHECKED] > 0
              && m[PushScheduler.MARK_CHECKED] <= m[PushScheduler.MARK_LANE_READY]
              && m[PushScheduler.MARK_LANE_READY] <= m[PushScheduler.MARK_LAUNCHED]
              && m[PushScheduler.MARK_LAUNCHED] <= m[PushScheduler.MARK_ENDED],
              "request " + i + " marks in order: " + java.util.Arrays.toString(m));
        }
      } finally {
        fetches.forEach(DeviceLanding.Fetch::close);
      }
      assertEquals(plans.length, r.server.requestsServed());
      assertTrue(r.server.peakInFlight() >= 1 && r.server.peakInFlight() <= 2, "peak " + r.server.peakInFlight());
      assertTrue(r.server.lanesMade() <= 2, "lanes made " + r.server.lanesMade() + ", expected at most the bound 2");
      assertEquals(0, r.landing.used());
      r.store.removeShuffle(3);
      assertEquals(0, r.store.deviceInUse(), "every served request released its pins");
    }
  }

  @Test
  void aClosedServerRefusesARequestAtStartHoldingNothing() throws TransportException {
    assumeGpu();
    try (Rig r = new Rig(1)) {
      r.pushAll(1);
      List<DeviceLanding.Want> wants = new ArrayList<>();
      expect(r.store, wants, 2);
      try (DeviceLanding.Fetch f = r.landing.prepare(3, W, wants)) {
        r.server.close();
        boolean[] called = {false};
        var e = assertThrows(TransportException.class, () -> r.server.start(f.request(), 30_000,
            new long[PushScheduler.MARKS], (bytes, error) -> called[0] = true));
        assertEquals(dev.slipstream.core.transport.TransportError.UNAVAILABLE, e.error(), e.getMessage());
        assertTrue(e.getMessage().contains("closed"), e.getMessage());
        assertTrue(!called[0], "a refused start reports through its exception only");
      }
      r.store.removeShuffle(3);
      assertEquals(0, r.store.deviceInUse(), "the refused request holds no pin");
    }
  }

  @Test
  void landedViewsStayByteExactWhileLaterRequestsLandUntilTheirRangeIsReleased() throws TransportException {
    assumeGpu();
    try (Rig r = new Rig(1)) {
      List<DeviceLanding.Want> wants = new ArrayList<>();
      List<byte[]> sections = new ArrayList<>();
      try (DeviceMapOutputStore.Pinned p = r.store.pin(3, 4)) {
        for (int q = 0; q < PARTS; q++) {
          byte[] b = new byte[(int) p.bytes(q)];
          p.block().read(p.offset(q), b, 0, b.length);
          sections.add(b);
          wants.add(new DeviceLanding.Want(4, q, b.length));
        }
      }
      DeviceLanding.Fetch held = r.landing.prepare(3, W, wants);
      r.server.serve(held.request(), 30_000);
      List<DeviceBatch> views = held.await(System.nanoTime() + 30_000_000_000L);
      long base = r.landing.region().devicePointer();
      for (int round = 0; round < 3; round++) {
        r.pushAll(1, 2, 3, 5, 6); // other requests reserve and land around the held range
      }
      assertEquals(held.length(), r.landing.used(), "the held range stays reserved, the others were released");
      for (int i = 0; i < views.size(); i++) {
        DeviceBatch v = views.get(i);
        assertEquals(BatchLayout.packedBytes(v.rows(), W), sections.get(i).length);
        assertArrayEquals(sections.get(i), r.landing.region().read(v.address() - base, sections.get(i).length),
            "view " + i + " after later requests landed");
      }
      held.close();
      assertEquals(0, r.landing.used(), "released once the views are no longer used");
    }
  }

  @Test
  void blocksLargerThanAPieceArePushedOverManyQueuesByteExactWithEmptyPiecesCounted() throws TransportException {
    assumeGpu();
    int n = 1_500_000; // two partitions of about 15 MB: 15 pieces each
    try (GpuContext ctx = GpuContext.open(0);
        PushKernel kernel = PushKernel.load(ctx);
        DeviceMapOutputStore store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, 5000), 128L << 20, 0);
        DeviceLanding landing = new DeviceLanding(ctx, 64L << 20, 1);
        RemoteRegion view = RemoteRegion.alias(landing.region());
        PushScheduler server = new PushScheduler(ctx, kernel, store, d -> view, 1 << 20, 1);
        DeviceBatch b = upload(ctx, rows(0, n), n)) {
      DeviceMapOutputWriter.write(ctx, store, 5, 1, List.of(b), 2, W, 30_000);
      byte[][] blocks = new byte[2][];
      try (DeviceMapOutputStore.Pinned p = store.pin(5, 1)) {
        for (int q = 0; q < 2; q++) {
          blocks[q] = new byte[(int) p.bytes(q)];
          p.block().read(p.offset(q), blocks[q], 0, blocks[q].length);
        }
      }
      assertTrue(blocks[0].length > 8 * WriteRequest.CHUNK_BYTES, "block of " + blocks[0].length + " bytes");
      long spare = 5 * WriteRequest.CHUNK_BYTES / 2; // capacity beyond the real bytes: 2 or 3 empty pieces
      List<DeviceLanding.Want> wants = List.of(new DeviceLanding.Want(1, 0, blocks[0].length + spare),
          new DeviceLanding.Want(1, 1, blocks[1].length));
      try (DeviceLanding.Fetch f = landing.prepare(5, W, wants)) {
        long pieces = WriteRequest.chunks(BatchLayout.align16(blocks[0].length + spare))
            + WriteRequest.chunks(BatchLayout.align16(blocks[1].length)) + 1;
        assertEquals(pieces, f.expectedPieces());
        assertEquals((long) blocks[0].length + blocks[1].length, server.serve(f.request(), 30_000));
        List<DeviceBatch> landed = f.await(System.nanoTime() + 30_000_000_000L); // checks the count is exact
        for (int q = 0; q < 2; q++) {
          long off = landed.get(q).address() - landing.region().devicePointer();
          assertArrayEquals(blocks[q], landing.region().read(off, blocks[q].length), "block " + q);
        }
      }
    }
  }

  @Test
  void anOutputSpilledToHostMemoryComesBackByteExact() {
    assumeGpu();
    int n = 50_000;
    try (GpuContext ctx = GpuContext.open(0)) {
      long bound = PartitionKernel.sizes(n, W, PARTS)[0];
      try (DeviceMapOutputStore store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, 2000), bound + 16, 8L << 20);
          DeviceBatch a = upload(ctx, rows(0, n), n);
          DeviceBatch b = upload(ctx, rows(n, n), n)) {
        DeviceMapOutputWriter.write(ctx, store, 1, 10, List.of(a), PARTS, W, 30_000);
        byte[] before;
        try (DeviceMapOutputStore.Pinned p = store.pin(1, 10)) {
          before = new byte[(int) p.block().length()];
          p.block().read(0, before, 0, before.length);
        }
        DeviceMapOutputWriter.write(ctx, store, 1, 11, List.of(b), PARTS, W, 30_000); // map 10 moves to host
        assertEquals(1, store.spills());
        assertTrue(store.hostInUse() > 0);
        try (DeviceMapOutputStore.Pinned p = store.pin(1, 10)) { // and map 11 moves out for it
          assertEquals(1, store.restores());
          byte[] after = new byte[(int) p.bytes(PARTS - 1) + (int) p.offset(PARTS - 1)];
          p.block().read(0, after, 0, after.length);
          assertArrayEquals(java.util.Arrays.copyOf(before, after.length), after);
        }
      }
    }
  }

  @Test
  void aReleasedRangeIsHandedOutAgainOnlyOnceZeroed() throws TransportException {
    assumeGpu();
    try (GpuContext ctx = GpuContext.open(0); DeviceLanding landing = new DeviceLanding(ctx, 64L << 20, 1)) {
      List<DeviceLanding.Want> wants = List.of(new DeviceLanding.Want(1, 0, 32L << 20));
      for (int round = 0; round < 20; round++) {
        long base;
        int len;
        try (DeviceLanding.Fetch f = landing.prepare(7, W, wants)) {
          base = f.request().entries().get(0).landingOffset();
          len = (int) f.length();
          assertArrayEquals(new byte[len], landing.region().read(base, len), "round " + round + ": handed out zeroed");
          // What a push leaves behind: data, table and a counted signal.
          byte[] dirty = new byte[len];
          java.util.Arrays.fill(dirty, (byte) 0x5a);
          landing.region().write(base, dirty);
        }
        assertEquals(0, landing.used());
      }
    }
  }

  @Test
  void aPrepareWaitingForSpaceTakesItSoonAfterAnotherTaskReleasesIt() throws Exception {
    assumeGpu();
    try (GpuContext ctx = GpuContext.open(0); DeviceLanding landing = new DeviceLanding(ctx, 64L << 20, 1)) {
      List<DeviceLanding.Want> wants = List.of(new DeviceLanding.Want(1, 0, 40L << 20)); // two do not fit
      DeviceLanding.Fetch first = landing.prepare(7, W, wants);
      Thread releaser = new Thread(() -> {
        try {
          Thread.sleep(200);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        first.close();
      });
      long start = System.nanoTime();
      releaser.start();
      // A deadline far beyond the release: the wait must end at the release, not at the deadline.
      try (DeviceLanding.Fetch second = landing.prepare(7, W, wants, start + 120_000_000_000L)) {
        long waitedMs = (System.nanoTime() - start) / 1_000_000;
        assertTrue(waitedMs < 60_000, "took the released space after " + waitedMs + " ms, not at the release");
        assertEquals(second.length(), landing.used());
      }
      releaser.join();
    }
  }

  @Test
  void aRangeReleasedRightAfterADeviceCopyOutOfItIsNotZeroedUnderTheCopy() throws TransportException {
    assumeGpu();
    // What the reader does with views beyond its share: copy them into buffers of their own, then
    // release the range at once. A device-to-device cuMemcpy may return before it is done, so the
    // zeroing queued by the release must wait for it.
    long bytes = 256L << 20;
    try (GpuContext ctx = GpuContext.open(0); DeviceLanding landing = new DeviceLanding(ctx, bytes + (1 << 20), 1);
        DeviceBuffer copy = ctx.allocate(bytes)) {
      for (int round = 0; round < 5; round++) {
        try (DeviceLanding.Fetch f = landing.prepare(7, W, List.of(new DeviceLanding.Want(1, 0, bytes)))) {
          long at = f.request().entries().get(0).landingOffset();
          landing.region().fill((byte) (0x10 + round)); // the whole region: the range is most of it
          copy.copyFromDevice(0, landing.region().devicePointer() + at, bytes);
        }
        byte[] back = copy.read(0, (int) bytes);
        for (int i = 0; i < back.length; i++) {
          if (back[i] != (byte) (0x10 + round)) {
            fail("round " + round + ": byte " + i + " of the copy is " + back[i] + ", expected " + (0x10 + round)
                + " (zeroed while it was copied)");
          }
        }
      }
    }
  }

  @Test
  void mapOutputsServedOverTheStagingPathLandInDeviceMemoryByteExact() throws Exception {
    assumeGpu();
    Map<String, String> conf = Map.of("spark.slipstream.landing.bytes", "8m", "spark.slipstream.reader.maxRequestBytes",
        "256k", "spark.slipstream.reader.maxBytesInFlight", "2m", "spark.slipstream.reader.fetchTimeout", "30s");
    java.nio.file.Path tmp = java.nio.file.Files.createTempDirectory("slipstream-staging-test-");
    dev.slipstream.core.transport.loopback.LoopbackFabric fabric = new dev.slipstream.core.transport.loopback.LoopbackFabric();
    try (GpuContext ctx = GpuContext.open(0);
        DeviceMapOutputStore store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, 3000), 64L << 20, 0);
        dev.slipstream.core.shuffle.ShuffleNode holder = StagedBlocksTest.node(fabric, conf, tmp, "holder");
        dev.slipstream.core.shuffle.ShuffleNode reader = StagedBlocksTest.node(fabric, conf, tmp, "reader")) {
      writeMaps(ctx, store, 2, 100_000);
      // The holder's block server copies device blocks to the host on its own threads.
      holder.serveAlso(StagedBlocks.source(store, holder.config().checksum()));
      List<DeviceLanding.Want> wants = new ArrayList<>();
      List<byte[]> sections = expect(store, wants, 1, 2);
      Map<dev.slipstream.core.shuffle.BlockId, byte[]> want = new HashMap<>();
      List<dev.slipstream.core.shuffle.BlockFetcher.RemoteBlock> blocks = new ArrayList<>();
      for (int i = 0; i < wants.size(); i++) {
        DeviceLanding.Want w = wants.get(i);
        var id = new dev.slipstream.core.shuffle.BlockId(3, w.mapAttemptId(), w.partition());
        want.put(id, sections.get(i));
        // Half of them understated, as a highly compressed map status may (their rest is streamed).
        long asked = i % 2 == 0 ? StagedBlocks.servedLength(w.capacity()) : w.capacity() / 2;
        blocks.add(new dev.slipstream.core.shuffle.BlockFetcher.RemoteBlock(id, asked));
      }
      int landed = 0;
      int views = 0;
      try (var f = reader.newFetcher(3, List.of(new dev.slipstream.core.shuffle.BlockFetcher.HolderPlan("holder",
          holder.localEndpoint(), blocks)), dev.slipstream.core.shuffle.FetchMetrics.NONE)) {
        while (f.hasNext()) {
          var b = f.next();
          byte[] section = want.get(b.id());
          long served = b.exactSize();
          assertEquals(StagedBlocks.servedLength(section.length), served, "block " + b.id());
          try (DeviceBuffer d = ctx.allocate(Math.max(16, served - StagedBlocks.TRAILER))) {
            // Whole blocks go to the device straight from the landing region, streamed ones piece by piece.
            ByteBuffer view = b.landedView();
            long rows = view != null ? StagedBlocks.land(view, W, d::write, "block " + b.id())
                : StagedBlocks.land(b.stream(), served, W, d::write, "block " + b.id());
            b.stream().close();
            views += view != null ? 1 : 0;
            assertEquals(BatchLayout.packedBytes(rows, W), section.length);
            assertArrayEquals(section, d.read(0, section.length), "block " + b.id());
          }
          landed++;
        }
      }
      assertEquals(wants.size(), landed);
      assertTrue(views > 0 && views < landed, views + " of " + landed + " blocks landed whole");
      assertEquals(0, holder.serveFailures());
    }
  }
}
