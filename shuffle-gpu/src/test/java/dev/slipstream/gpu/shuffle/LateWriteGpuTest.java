package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.DeviceBuffer;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuProbe;
import dev.slipstream.gpu.GpuRuntime;
import dev.slipstream.gpu.PushKernel;
import dev.slipstream.gpu.RegionExport;
import dev.slipstream.gpu.RemoteRegion;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A landing range belongs to one request, on a real GPU: a push that comes after its reader timed
 * out lands in the range still retained for it, never in another fetch's; once a range was handed
 * out again anyway (the retention bound passed), a late push cannot complete the fetch that reuses
 * it (its block table names the late request); a request naming a landing descriptor its reader
 * did not register is refused and writes nothing. One GPU, the landing region aliased (the CUDA IPC
 * import's size check is ImportedLandingGpuTest's).
 */
class LateWriteGpuTest {
  private static final int[] W = {8, 4};
  private static final int PARTS = 4;

  private static void assumeGpu() {
    GpuProbe p = GpuRuntime.probe();
    assumeTrue(p.available(), p.reason());
  }

  /** Maps 1..count of shuffle 3 with n random rows each, partitioned into the store. */
  private static void writeMaps(GpuContext ctx, DeviceMapOutputStore store, int count, int n) {
    for (long map = 1; map <= count; map++) {
      BatchLayout l = BatchLayout.packed(n, W);
      ByteBuffer b = ByteBuffer.allocate((int) l.bufferBytes()).order(ByteOrder.LITTLE_ENDIAN);
      SplittableRandom r = new SplittableRandom(map);
      for (int i = 0; i < n; i++) {
        long key = r.nextLong();
        b.putLong(8 * i, key);
        b.putLong((int) l.offset(0) + 8 * i, key ^ map);
        b.putInt((int) l.offset(1) + 4 * i, (int) (map * 1_000_000 + i));
      }
      DeviceBuffer d = ctx.allocate(Math.max(16, b.capacity()));
      d.write(0, b.array());
      try (DeviceBatch batch = DeviceBatch.owning(ctx.device(), d.address(), l, d)) {
        DeviceMapOutputWriter.write(ctx, store, 3, map, List.of(batch), PARTS, W, 30_000);
      }
    }
  }

  /** Every partition of {@code map} as wanted blocks, and their bytes as the store holds them. */
  private static List<byte[]> expect(DeviceMapOutputStore store, List<DeviceLanding.Want> wants, long map) {
    List<byte[]> sections = new ArrayList<>();
    try (DeviceMapOutputStore.Pinned p = store.pin(3, map)) {
      for (int q = 0; q < PARTS; q++) {
        byte[] b = new byte[(int) p.bytes(q)];
        p.block().read(p.offset(q), b, 0, b.length);
        sections.add(b);
        // The same capacity for every map, so two requests lay out alike and reuse the same offsets.
        wants.add(new DeviceLanding.Want(map, q, 64 * 1024));
      }
    }
    return sections;
  }

  private static final class Rig implements AutoCloseable {
    final GpuContext ctx = GpuContext.open(0);
    final PushKernel kernel = PushKernel.load(ctx);
    final DeviceMapOutputStore store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, 3000), 64L << 20, 0);
    final DeviceLanding landing = new DeviceLanding(ctx, 4L << 20, 1);
    final RemoteRegion view = RemoteRegion.alias(landing.region());
    final PushScheduler server = new PushScheduler(ctx, kernel, store, d -> view, 1 << 20, 2);

    Rig() {
      writeMaps(ctx, store, 3, 2_000);
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

  private static void checkLanded(Rig r, List<DeviceBatch> landed, List<byte[]> sections, String what) {
    assertEquals(sections.size(), landed.size());
    for (int i = 0; i < landed.size(); i++) {
      long off = landed.get(i).address() - r.landing.region().devicePointer();
      assertArrayEquals(sections.get(i), r.landing.region().read(off, sections.get(i).length), what + ", block " + i);
    }
  }

  private static long lowest(DeviceLanding.Fetch f) {
    return f.request().entries().get(0).landingOffset();
  }

  @Test
  void aPushAfterTheReaderTimedOutLandsInItsRetainedRangeNeverInTheNextFetch() throws TransportException {
    assumeGpu();
    try (Rig r = new Rig()) {
      List<DeviceLanding.Want> wantsA = new ArrayList<>();
      expect(r.store, wantsA, 1);
      DeviceLanding.Fetch a = r.landing.prepare(3, W, wantsA);
      assertEquals(TransportError.TIMEOUT, assertThrows(TransportException.class,
          () -> a.await(System.nanoTime())).error(), "the holder has not pushed yet");
      a.retain("holder-1", System.nanoTime() + 60_000_000_000L);
      assertEquals(a.length(), r.landing.retainedBytes());

      List<DeviceLanding.Want> wantsB = new ArrayList<>();
      List<byte[]> sectionsB = expect(r.store, wantsB, 2);
      try (DeviceLanding.Fetch b = r.landing.prepare(3, W, wantsB)) {
        assertTrue(lowest(b) >= lowest(a) + a.length() || lowest(b) + b.length() <= lowest(a),
            "the next fetch gets other memory while the first holder may still write");
        // The holder of A pushes late, after B was laid out, then B's holder pushes.
        r.server.serve(ShuffleMessages.decodeRequest(a.request().toBytes()), 30_000);
        r.server.serve(ShuffleMessages.decodeRequest(b.request().toBytes()), 30_000);
        checkLanded(r, b.await(System.nanoTime() + 30_000_000_000L), sectionsB, "fetch B");
      }
      r.landing.finished(a.request().requestId()); // A's holder answered: its range goes back
      assertEquals(0, r.landing.retainedBytes());
      assertEquals(1, r.landing.releasedAnswered());
      assertEquals(0, r.landing.used());
    }
  }

  @Test
  void aLatePushIntoAReusedRangeCannotCompleteTheFetchThatReusesIt() throws Exception {
    assumeGpu();
    try (Rig r = new Rig()) {
      List<DeviceLanding.Want> wantsA = new ArrayList<>();
      expect(r.store, wantsA, 1);
      DeviceLanding.Fetch a = r.landing.prepare(3, W, wantsA);
      WriteRequest lateA = ShuffleMessages.decodeRequest(a.request().toBytes());
      a.retain("holder-1", System.nanoTime()); // a bound that has passed: handed out again without an answer
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (r.landing.retainedBytes() > 0 && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      assertEquals(1, r.landing.releasedByBound());

      List<DeviceLanding.Want> wantsC = new ArrayList<>();
      expect(r.store, wantsC, 2);
      try (DeviceLanding.Fetch c = r.landing.prepare(3, W, wantsC)) {
        assertEquals(lowest(a), lowest(c), "the same memory, laid out alike");
        assertEquals(lateA.signalOffset(), c.request().signalOffset());
        r.server.serve(lateA, 30_000); // A's holder, late: its blocks, its table and its signal adds land in C's range
        TransportException e = assertThrows(TransportException.class, () -> c.await(System.nanoTime()
            + 30_000_000_000L));
        assertEquals(TransportError.MALFORMED, e.error());
        assertTrue(e.getMessage().contains("block table names request " + lateA.requestId()) && e.getMessage()
            .contains("expected request " + c.request().requestId()), e.getMessage());
      }
    }
  }

  @Test
  void aRequestNamingALandingItsReaderDidNotRegisterIsRefusedAndWritesNothing() throws TransportException {
    assumeGpu();
    try (Rig r = new Rig()) {
      GpuEndpoint self = new GpuEndpoint("host/boot", 0, "p", "u", r.landing.export());
      RegionExport real = r.landing.export();
      RegionExport forged = new RegionExport(real.kind(), real.id(), real.device(), real.key() ^ 1,
          real.length(), real.ownerPid(), real.ipcHandle(), real.shmName());
      PeerLandings landings = new PeerLandings("1", self, id -> Optional.empty());
      List<DeviceLanding.Want> wants = new ArrayList<>();
      expect(r.store, wants, 1);
      try (DeviceLanding.Fetch f = r.landing.prepare(3, W, wants)) {
        WriteRequest q = f.request();
        WriteRequest withForged = DeviceRequests.from(DeviceRequests.request(q.requestId(), q.shuffleId(), forged,
            q.tableOffset(), q.signalOffset(), q.widths(), q.entries()), "1", 30_000).check();
        assertEquals(TransportError.BAD_KEY, assertThrows(TransportException.class,
            () -> landings.check(withForged)).error());
        assertEquals(TransportError.UNKNOWN_REGION, assertThrows(TransportException.class,
            () -> landings.check(DeviceRequests.from(q, "2", 30_000))).error(), "a reader not in the peer table");
        assertEquals(real, landings.check(DeviceRequests.from(q, "1", 30_000)));
        byte[] zeros = new byte[(int) f.length()];
        assertArrayEquals(zeros, r.landing.region().read(lowest(f), zeros.length), "nothing landed");
      }
    }
  }

  @Test
  void aLostReadersLandingIsNeverPushedIntoAgain() throws TransportException {
    assumeGpu();
    try (Rig r = new Rig()) {
      List<DeviceLanding.Want> wants = new ArrayList<>();
      List<byte[]> sections = expect(r.store, wants, 1);
      try (DeviceLanding.Fetch f = r.landing.prepare(3, W, wants)) {
        r.server.serve(ShuffleMessages.decodeRequest(f.request().toBytes()), 30_000); // a lane into it exists
        checkLanded(r, f.await(System.nanoTime() + 30_000_000_000L), sections, "before the loss");
      }
      r.server.forget(r.landing.export().descriptor()); // the reader was lost
      try (DeviceLanding.Fetch f = r.landing.prepare(3, W, wants)) {
        TransportException e = assertThrows(TransportException.class,
            () -> r.server.serve(ShuffleMessages.decodeRequest(f.request().toBytes()), 30_000));
        assertEquals(TransportError.UNAVAILABLE, e.error());
        assertTrue(e.getMessage().contains("was revoked"), e.getMessage());
        byte[] zeros = new byte[(int) f.length()];
        assertArrayEquals(zeros, r.landing.region().read(lowest(f), zeros.length), "nothing landed");
      }
    }
  }
}
