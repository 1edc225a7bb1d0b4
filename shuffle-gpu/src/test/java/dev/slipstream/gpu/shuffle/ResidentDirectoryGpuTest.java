package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.slipstream.core.shuffle.BlockTable;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuRegion;
import dev.slipstream.gpu.QueueSet;
import dev.slipstream.gpu.RemoteRegion;
import dev.slipstream.gpu.GpuProbe;
import dev.slipstream.gpu.GpuRuntime;
import dev.slipstream.gpu.GpuTestSupport;
import dev.slipstream.gpu.ResidentServer;
import dev.slipstream.gpu.SlipStatus;
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
 * A resident server's directory following a device map-output store on one GPU: a committed output
 * is served its exact bytes; a spilled or removed one is refused ({@code SLIP_ERR_BAD_REGION},
 * nothing written) until it is back in device memory; a re-committed attempt is served its new
 * bytes. The same with the reader entry pushed to over gpunetio (the directory names each output's
 * registered region, from which the kernel's WQEs read: served means the kernel pushed it, not the
 * host-driven fallback). Skips with the reason without a GPU (or without the GPUNetIO headers).
 */
class ResidentDirectoryGpuTest {
  private static final int[] W = {8};
  private static final int SHUFFLE = 4;
  private static final long KEY = 0x7e57L;
  private static final int ROWS = 4096;
  private static final long PART = BatchLayout.packedBytes(ROWS, W); // 64 KiB
  private static final int LANDING = 1 << 20;

  /** Commits map {@code map}: two partitions of ROWS rows, filled from {@code seed}; returns its bytes. */
  private static byte[] commit(DeviceMapOutputStore store, long map, int seed) {
    OutputSpace.Block b = store.allocate(2 * PART);
    byte[] bytes = new byte[(int) (2 * PART)];
    new java.util.SplittableRandom(seed).nextBytes(bytes);
    b.write(0, bytes, 0, bytes.length);
    store.commit(SHUFFLE, map, b, W, new long[] {0, PART, 2 * PART}, new long[] {ROWS, ROWS});
    return bytes;
  }

  private static ServeRing.Answer fetch(ServeRing ring, long map, int partition) {
    long t = ring.post(new ServeRing.Request(map * 10 + partition, SHUFFLE, KEY, 0, System.nanoTime() + 10_000_000_000L,
        List.of(new ServeRing.Block(map, partition, 4096, PART))), 5_000_000_000L);
    assertTrue(t >= 0);
    ServeRing.Answer a = ring.await(t, 10_000_000_000L);
    assertNotNull(a, "an answer within 10 s");
    return a;
  }

  @Test
  void servesWhatTheStoreHasInDeviceMemoryAndNothingElse() throws Exception {
    servesTheStore(false);
  }

  @Test
  void overGpunetioServesWhatTheStoreHasInDeviceMemoryAndNothingElse() throws Exception {
    GpuTestSupport.assumeGpunetio();
    servesTheStore(true);
  }

  private void servesTheStore(boolean gpunetio) throws Exception {
    GpuProbe probe = GpuRuntime.probe();
    assumeTrue(probe.available(), probe.reason());
    Path dir = Files.createTempDirectory(Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm")
        : Path.of(System.getProperty("java.io.tmpdir")), "slipstream-directory-test");
    try (GpuContext ctx = GpuContext.open(0);
        GpuRegion landing = GpuRegion.create(ctx, MemoryKind.DEVICE, LANDING, 1);
        RemoteRegion view = RemoteRegion.alias(landing);
        ServeRingFile file = ServeRingFile.create(dir.resolve("ring"), 16);
        DeviceMapOutputStore store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, 7000), 4 * PART, 16 * PART);
        ResidentServer server = ResidentServer.create(ctx, new ResidentServer.Settings(1, 64, 2, 256,
            Duration.ofSeconds(5), Duration.ofNanos(50_000)));
        GpuRegion staging = GpuRegion.create(ctx, MemoryKind.DEVICE, server.stagingBytes(), 2);
        QueueSet queues = gpunetio ? ResidentServer.nicQueues(ctx, staging, view) : null;
        ResidentDirectory directory = new ResidentDirectory(ctx, server, 1 << 16, Duration.ofSeconds(1))) {
      landing.fill((byte) 0);
      if (gpunetio) {
        server.attachReaderNic(0, file.path(), queues, LANDING, KEY);
      } else {
        server.attachReader(0, file.path(), landing.devicePointer(), LANDING, KEY);
      }
      ServeRing ring = file.ring();
      byte[] first = commit(store, 1, 1);
      store.follow(directory);
      byte[] second = commit(store, 2, 2);
      assertEquals(2, directory.entries());

      ServeRing.Answer a = fetch(ring, 2, 1);
      assertTrue(a.ok(), "status " + a.status());
      assertArrayEquals(Arrays.copyOfRange(second, (int) PART, (int) (2 * PART)), landing.read(4096, (int) PART));
      ByteBuffer table = ByteBuffer.wrap(landing.read(0, 32)).order(ByteOrder.LITTLE_ENDIAN);
      BlockTable.checkHeader(table, 21, 1);
      assertEquals(PART, BlockTable.record(table, 0).bytes());
      assertEquals(ROWS, BlockTable.record(table, 0).rows(), "the store's row count, through the directory");

      // A third output spills the first (the budget holds two): refused, nothing written.
      byte[] third = commit(store, 3, 3);
      landing.fill((byte) 0);
      ServeRing.Answer spilled = fetch(ring, 1, 0);
      assertEquals(SlipStatus.SLIP_ERR_BAD_REGION.code(), spilled.status(), "a spilled output is not served");
      assertArrayEquals(new byte[(int) PART], landing.read(4096, (int) PART), "nothing written");
      // Brought back (a host-driven push pins it): served again, its own bytes.
      try (DeviceMapOutputStore.Pinned p = store.pin(SHUFFLE, 1)) {
        ServeRing.Answer back = fetch(ring, 1, 0);
        assertTrue(back.ok(), "status " + back.status());
        assertArrayEquals(Arrays.copyOfRange(first, 0, (int) PART), landing.read(4096, (int) PART));
      }

      // Removed: refused. Committed again with other bytes: served those.
      assertTrue(store.removeMapOutput(SHUFFLE, 3));
      assertEquals(SlipStatus.SLIP_ERR_BAD_REGION.code(), fetch(ring, 3, 0).status());
      byte[] again = commit(store, 3, 33);
      assertTrue(fetch(ring, 3, 1).ok());
      assertArrayEquals(Arrays.copyOfRange(again, (int) PART, (int) (2 * PART)), landing.read(4096, (int) PART));
      assertTrue(!Arrays.equals(third, again));

      store.follow(null);
      assertEquals(0, directory.entries(), "nothing entered once the store is followed by nobody");
      assertEquals(SlipStatus.SLIP_ERR_BAD_REGION.code(), fetch(ring, 3, 1).status());
      ResidentServer.Stats st = server.stats();
      assertEquals(3, st.served(), "served by the kernel: " + st);
      assertEquals(3, st.failed(), "refused by the kernel: " + st);
      server.detachReader(0);
    } finally {
      try (var files = Files.list(dir)) {
        files.forEach(f -> f.toFile().delete());
      }
      Files.deleteIfExists(dir);
    }
  }
}
