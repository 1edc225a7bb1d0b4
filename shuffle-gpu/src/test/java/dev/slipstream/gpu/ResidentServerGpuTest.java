package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.shuffle.BlockTable;
import dev.slipstream.gpu.serve.ServeRing;
import dev.slipstream.gpu.serve.ServeRingFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The resident server driven from Java on one GPU: this JVM is the reader (it makes the ring file
 * and posts through {@link ServeRing}) and the holder (it maps the file into its GPU and enters the
 * map output). Blocks and block table land byte-exact with nothing posted to the server by the
 * host (the wake thread launches the kernel); a forged key and a revoked output are refused with
 * nothing written; the kernel parks when idle and the next request wakes it; a file that is not a
 * ring is refused. Skips with the reason without a GPU.
 */
class ResidentServerGpuTest {
  private static final int SHUFFLE = 3;
  private static final long MAP = 42;
  private static final long KEY = 0x5eed_f00dL;
  private static final int LANDING = 4 << 20;
  private static final long[] SIZES = {4096, 65536, 16, 1 << 20};
  private static final byte UNTOUCHED = (byte) 0xEE;

  private static long deadline() {
    return System.nanoTime() + 10_000_000_000L;
  }

  private static ServeRing.Answer serve(ServeRing ring, ServeRing.Request r) {
    long t = ring.post(r, 5_000_000_000L);
    assertTrue(t >= 0, "the ring took the request");
    ServeRing.Answer a = ring.await(t, 10_000_000_000L);
    assertNotNull(a, "an answer within 10 s");
    return a;
  }

  private static Path ringDir() throws Exception {
    Path shm = Path.of("/dev/shm");
    return Files.createTempDirectory(Files.isDirectory(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir")),
        "slipstream-serve-test");
  }

  @Test
  void servesFromAJavaRingAndRefusesWhatItMustNot() throws Exception {
    GpuTestSupport.assumeGpu();
    Path dir = ringDir();
    long[] offsets = new long[SIZES.length + 1];
    for (int p = 0; p < SIZES.length; p++) {
      offsets[p + 1] = offsets[p] + SIZES[p];
    }
    int total = (int) offsets[SIZES.length];
    byte[] output = GpuTestSupport.pattern(11, total);
    ByteBuffer offs = ByteBuffer.allocate(8 * offsets.length).order(ByteOrder.LITTLE_ENDIAN);
    Arrays.stream(offsets).forEach(offs::putLong);
    ResidentServer.Settings settings = new ResidentServer.Settings(2, 64, 2, 256, Duration.ofMillis(200),
        Duration.ofNanos(50_000));
    try (GpuContext ctx = GpuContext.open(0);
        DeviceBuffer out = ctx.allocate(total);
        DeviceBuffer dOffsets = ctx.allocate(8L * offsets.length);
        DeviceBuffer landing = ctx.allocate(LANDING);
        ServeRingFile file = ServeRingFile.create(dir.resolve("reader-0"), 64)) {
      out.write(0, output);
      dOffsets.write(0, offs.array());
      landing.fill(UNTOUCHED);
      try (ResidentServer server = ResidentServer.create(ctx, settings)) {
        ServeRing ring = file.ring();
        assertFalse(ring.holderAttached(), "no holder serves the ring yet");
        server.attachReader(0, file.path(), landing.address(), LANDING, KEY);
        assertTrue(ring.holderAttached(), "the holder said it serves the ring");
        server.putOutput(SHUFFLE, MAP, out.address(), dOffsets.address(), 0, SIZES.length);

        // Two blocks and the table, with no start from the host: the wake thread launches the kernel.
        ServeRing.Request two = new ServeRing.Request(900, SHUFFLE, KEY, 0, deadline(),
            List.of(new ServeRing.Block(MAP, 1, 4096, 65536), new ServeRing.Block(MAP, 3, 4096 + 65536, 1 << 20)));
        long posted = System.nanoTime();
        ServeRing.Answer a = serve(ring, two);
        long seen = System.nanoTime();
        assertTrue(a.ok(), "status " + a.status() + " value " + a.value());
        assertEquals(65536 + (1 << 20), a.bytes());
        // The kernel's instants: in order, and (within the launch clock offset's error) between the
        // post and the answer seen on this host's clock.
        assertTrue(a.takenNanos() != 0 && a.takenNanos() <= a.copyNanos() && a.copyNanos() <= a.copiedNanos()
            && a.copiedNanos() <= a.answeredNanos(), "instants out of order: " + a);
        assertTrue(a.takenNanos() > posted - 2_000_000 && a.answeredNanos() < seen + 2_000_000,
            "instants " + a + " outside the post at " + posted + " and the answer seen at " + seen);
        assertArrayEquals(Arrays.copyOfRange(output, (int) offsets[1], (int) offsets[2]), landing.read(4096, 65536));
        assertArrayEquals(Arrays.copyOfRange(output, (int) offsets[3], (int) offsets[4]),
            landing.read(4096 + 65536, 1 << 20));
        // The host path's block table, as its readers check it.
        ByteBuffer table = ByteBuffer.wrap(landing.read(0, 48)).order(ByteOrder.LITTLE_ENDIAN);
        BlockTable.checkHeader(table, 900, 2);
        assertEquals(65536, BlockTable.record(table, 0).bytes());
        assertEquals(1 << 20, BlockTable.record(table, 1).bytes());
        assertEquals(0, BlockTable.record(table, 1).rows(), "no row counts in the directory");

        // With a signal word: the host path's signal (pieces above block and table bytes) after the table.
        landing.fill(UNTOUCHED);
        long signalAt = 4096 + 4096;
        ServeRing.Answer signalled = serve(ring, new ServeRing.Request(905, SHUFFLE, KEY, 0, deadline(),
            List.of(new ServeRing.Block(MAP, 0, 4096, 4096)), signalAt, 7));
        assertTrue(signalled.ok(), "status " + signalled.status());
        long signal = ByteBuffer.wrap(landing.read(signalAt, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
        assertEquals(dev.slipstream.core.shuffle.LandingSignal.of(7, 4096 + BlockTable.bytes(1)), signal);
        // A signal over the table, or over a block: refused, nothing written.
        landing.fill(UNTOUCHED);
        ServeRing.Answer overTable = serve(ring, new ServeRing.Request(906, SHUFFLE, KEY, 0, deadline(),
            List.of(new ServeRing.Block(MAP, 0, 4096, 4096)), 16, 2));
        assertEquals(SlipStatus.SLIP_ERR_OUT_OF_RANGE.code(), overTable.status());
        ServeRing.Answer overBlock = serve(ring, new ServeRing.Request(907, SHUFFLE, KEY, 0, deadline(),
            List.of(new ServeRing.Block(MAP, 0, 4096, 4096)), 4096 + 64, 2));
        assertEquals(SlipStatus.SLIP_ERR_INVALID_ARG.code(), overBlock.status());
        assertUntouched(landing);

        // A forged key: refused with its code, nothing written.
        landing.fill(UNTOUCHED);
        ServeRing.Answer forged = serve(ring, new ServeRing.Request(901, SHUFFLE, KEY ^ 1, 0, deadline(),
            List.of(new ServeRing.Block(MAP, 0, 4096, 4096))));
        assertEquals(SlipStatus.SLIP_ERR_BAD_KEY.code(), forged.status());
        assertEquals(KEY ^ 1, forged.value(), "the answer names the key it got");
        assertUntouched(landing);

        // A block larger than its room: refused, nothing written.
        ServeRing.Answer small = serve(ring, new ServeRing.Request(902, SHUFFLE, KEY, 0, deadline(),
            List.of(new ServeRing.Block(MAP, 0, 4096, 4096), new ServeRing.Block(MAP, 1, 8192, 1024))));
        assertEquals(SlipStatus.SLIP_ERR_OUT_OF_RANGE.code(), small.status());
        assertEquals(1, small.block(), "the second block failed");
        assertUntouched(landing);

        // A revoked output is no longer served.
        server.revokeOutput(SHUFFLE, MAP, Duration.ofSeconds(1));
        ServeRing.Answer revoked = serve(ring, new ServeRing.Request(903, SHUFFLE, KEY, 0, deadline(),
            List.of(new ServeRing.Block(MAP, 0, 4096, 4096))));
        assertEquals(SlipStatus.SLIP_ERR_BAD_REGION.code(), revoked.status());
        assertUntouched(landing);
        server.putOutput(SHUFFLE, MAP, out.address(), dOffsets.address(), 0, SIZES.length);

        // Idle: the kernel parks; the next request wakes it.
        long t0 = System.nanoTime();
        while (server.resident() && System.nanoTime() - t0 < 10_000_000_000L) {
          Thread.sleep(5);
        }
        assertFalse(server.resident(), "still resident 10 s after its last request");
        ServeRing.Answer woken = serve(ring, new ServeRing.Request(904, SHUFFLE, KEY, 0, deadline(),
            List.of(new ServeRing.Block(MAP, 2, 4096, 16))));
        assertTrue(woken.ok(), "after parking: status " + woken.status());
        assertArrayEquals(Arrays.copyOfRange(output, (int) offsets[2], (int) offsets[3]), landing.read(4096, 16));

        ResidentServer.Stats stats = server.stats();
        assertEquals(3, stats.served());
        assertEquals(5, stats.failed());
        assertEquals(65536 + (1 << 20) + 4096 + 16, stats.bytes());
        assertEquals(null, server.wakeFailure());
        server.detachReader(0);
      }
    } finally {
      try (var files = Files.list(dir)) {
        files.forEach(f -> f.toFile().delete());
      }
      Files.deleteIfExists(dir);
    }
  }

  @Test
  void aFileThatIsNotARingIsRefused() throws Exception {
    GpuTestSupport.assumeGpu();
    Path dir = ringDir();
    Path notRing = dir.resolve("not-a-ring");
    Files.write(notRing, new byte[(int) ServeRing.bytes(16)]);
    ResidentServer.Settings settings = new ResidentServer.Settings(1, 16, 1, 32, Duration.ofMillis(10),
        Duration.ofMillis(1));
    try (GpuContext ctx = GpuContext.open(0);
        DeviceBuffer landing = ctx.allocate(1 << 16);
        ResidentServer server = ResidentServer.create(ctx, settings)) {
      GpuException e = assertThrows(GpuException.class,
          () -> server.attachReader(0, notRing, landing.address(), 1 << 16, KEY));
      assertEquals(SlipStatus.SLIP_ERR_BAD_DESCRIPTOR, e.status());
      assertTrue(e.getMessage().contains("magic 0x0"), e.getMessage());
      assertThrows(IllegalArgumentException.class,
          () -> server.attachReader(1, notRing, landing.address(), 1 << 16, KEY), "entry 1 of a one-reader server");
    } finally {
      Files.deleteIfExists(notRing);
      Files.deleteIfExists(dir);
    }
  }

  private static void assertUntouched(DeviceBuffer landing) {
    byte[] all = landing.read(0, (int) landing.length());
    for (int i = 0; i < all.length; i++) {
      if (all[i] != UNTOUCHED) {
        throw new AssertionError("landing byte " + i + " was written: " + all[i]);
      }
    }
  }
}
