package dev.slipstream.gpu.shuffle;

import dev.slipstream.gpu.nic.NicLanding;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import dev.slipstream.gpu.RegionExport;
import dev.slipstream.gpu.nic.NicLanding;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Codecs of the GPU shuffle: batch layout, GPU endpoint; and the per-pair path decision. */
class GpuShuffleCodecTest {
  static RegionExport deviceLanding(int device, long length) {
    byte[] ipc = new byte[RegionExport.IPC_HANDLE_BYTES];
    Arrays.fill(ipc, (byte) 7);
    return RegionExport.decode(new RegionExport(MemoryKind.DEVICE, 1, device, 0x1234_5678_9abcL, length, 4242,
        ipc, null).encode());
  }

  @Test
  void packedLayoutMatchesThePartitionKernelsBlocks() {
    BatchLayout l = BatchLayout.packed(3, 4, 16, 1);
    // keys 24 -> 32; col0 12 -> 16; col1 48; col2 3 -> 16
    assertEquals(0, l.keyOffset());
    assertArrayEquals(new long[] {32, 48, 96}, l.offsets());
    assertEquals(112, l.bufferBytes());
    assertEquals(112, BatchLayout.packedBytes(3, new int[] {4, 16, 1}));
    assertEquals(0, BatchLayout.packed(0, 8).bufferBytes());
    assertEquals(8 + 4 + 16 + 1, l.rowBytes());
    assertEquals(l, BatchLayout.decode(l.encode()));
  }

  @Test
  void batchLayoutRejectsColumnsOutsideTheBufferAndForgedBytes() {
    var e = assertThrows(IllegalArgumentException.class,
        () -> new BatchLayout(10, 0, new int[] {4}, new long[] {80}, 100));
    assertEquals("batch layout: column 0 at offset 80 + 40 bytes outside the buffer of 100 bytes", e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> new BatchLayout(1, 4, new int[] {}, new long[] {}, 16));
    assertEquals("batch layout: key column at offset 4, expected >= 0 and aligned to its width 8", e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> BatchLayout.packed(2, 3));
    assertEquals("batch layout: column 0 width 3, expected 1, 2, 4, 8 or 16", e.getMessage());
    byte[] good = BatchLayout.packed(5, 8, 4).encode();
    e = assertThrows(IllegalArgumentException.class, () -> BatchLayout.decode(Arrays.copyOf(good, good.length - 1)));
    assertEquals("batch layout: 56 bytes for 2 columns, expected 57", e.getMessage());
    byte[] forged = good.clone();
    forged[0] ^= 1;
    assertTrue(assertThrows(IllegalArgumentException.class, () -> BatchLayout.decode(forged)).getMessage()
        .startsWith("batch layout: magic 0x4c424c52, expected 0x4c424c53"));
    byte[] columns = good.clone();
    columns[29] = 9; // column count
    assertEquals("batch layout: 9 columns, expected 0..8",
        assertThrows(IllegalArgumentException.class, () -> BatchLayout.decode(columns)).getMessage());
  }

  @Test
  void gpuEndpointRoundTripsAndRejectsForgedFields() throws TransportException {
    GpuEndpoint g = new GpuEndpoint("host-a/boot-1", 1, "0000:1b:00.0", "GPU-0123", deviceLanding(1, 1 << 20));
    WireWriter w = new WireWriter(512);
    g.encode(w);
    byte[] bytes = w.toByteArray();
    WireReader r = new WireReader(bytes);
    assertEquals(g, GpuEndpoint.decode(r));
    r.expectEnd("endpoint");
    byte[] version = bytes.clone();
    version[0] = 1;
    assertEquals("BAD_VERSION: GPU endpoint: version 1, expected 4",
        assertThrows(TransportException.class, () -> GpuEndpoint.decode(new WireReader(version))).getMessage());
    byte[] truncated = Arrays.copyOf(bytes, bytes.length - 10);
    assertThrows(TransportException.class, () -> GpuEndpoint.decode(new WireReader(truncated)));
    var e = assertThrows(IllegalArgumentException.class,
        () -> new GpuEndpoint("h", 0, "p", "u", deviceLanding(1, 4096)));
    assertEquals("GPU endpoint: landing region 1 is DEVICE memory on device 1, expected DEVICE memory on device 0",
        e.getMessage());
    String ring = "/dev/shm/slipstream-ring-" + "0123456789abcdef".repeat(2);
    GpuEndpoint withRing = new GpuEndpoint("host-a/boot-1", 1, "p", "u", deviceLanding(1, 4096), ring);
    WireWriter w2 = new WireWriter(512);
    withRing.encode(w2);
    assertEquals(withRing, GpuEndpoint.decode(new WireReader(w2.toByteArray())));
    for (String forged : new String[] {"/etc/passwd", "slipstream-ring-" + "0".repeat(32), "/dev/shm/slipstream-ring-x"}) {
      assertEquals("GPU endpoint: request ring '" + forged + "', expected none or an absolute path of at most 1024"
          + " characters to a file named slipstream-ring-<32 hex digits>",
          assertThrows(IllegalArgumentException.class,
              () -> new GpuEndpoint("h", 1, "p", "u", deviceLanding(1, 4096), forged)).getMessage());
    }
  }

  @Test
  void aGpuEndpointSharesItsLandingAndRingWithExecutorsOfItsMachineOnly() throws TransportException {
    String ring = "/dev/shm/slipstream-ring-" + "0123456789abcdef".repeat(2);
    GpuEndpoint g = new GpuEndpoint("host-a/boot-1", 1, "p", "u", deviceLanding(1, 4096), ring);
    GpuEndpoint sameHost = new GpuEndpoint("host-a/boot-1", 0, "p0", "u0", deviceLanding(0, 4096));
    GpuEndpoint otherHost = new GpuEndpoint("host-b/boot-2", 1, "p1", "u1", deviceLanding(1, 4096));
    GpuEndpoint rebooted = new GpuEndpoint("host-a/boot-2", 0, "p0", "u0", deviceLanding(0, 4096));
    assertEquals(g, g.sharedWith(sameHost));
    for (GpuEndpoint other : new GpuEndpoint[] {otherHost, rebooted, null}) {
      GpuEndpoint seen = g.sharedWith(other);
      assertTrue(seen.landing().isEmpty(), "no landing descriptor (CUDA IPC handle, key) for " + other);
      assertEquals("", seen.requestRing());
      assertEquals(List.of(g.hostId(), g.device(), g.uuid()), List.of(seen.hostId(), seen.device(), seen.uuid()));
      WireWriter w = new WireWriter(512);
      seen.encode(w);
      byte[] wire = w.toByteArray();
      assertEquals(seen, GpuEndpoint.decode(new WireReader(wire)));
      assertTrue(wire.length < RegionExport.BYTES, "the wire form carries no descriptor: " + wire.length + " bytes");
    }
    assertEquals(GpuPath.STAGED, GpuPath.between(otherHost, g.sharedWith(otherHost)), "enough to choose the path");
  }

  @Test
  void nicLandingTravelsToEveryMachineAndForgedOnesAreRefused() throws Exception {
    GpuEndpoint g = new GpuEndpoint("host-a/boot-1", 1, "p", "u", deviceLanding(1, 4096))
        .withNic(new NicLanding(1, 0xabcd, 4096));
    WireWriter w = new WireWriter(512);
    g.encode(w);
    assertEquals(g, GpuEndpoint.decode(new WireReader(w.toByteArray())));
    GpuEndpoint seen = g.sharedWith(new GpuEndpoint("host-b/boot", 0, "p", "u", deviceLanding(0, 4096)));
    assertTrue(seen.landing().isEmpty(), "no CUDA IPC handle leaves the machine");
    assertEquals(g.nic(), seen.nic(), "the NIC landing does");
    WireWriter presence = new WireWriter(64).putByte(GpuEndpoint.VERSION).putString("h").putInt(0).putString("p")
        .putString("u").putByte(2);
    TransportException p = assertThrows(TransportException.class,
        () -> GpuEndpoint.decode(new WireReader(presence.toByteArray())));
    assertTrue(p.getMessage().contains("NIC landing presence byte 2, expected 0 (none) or 1"), p.getMessage());
    WireWriter id = new WireWriter(64).putByte(GpuEndpoint.VERSION).putString("h").putInt(0).putString("p")
        .putString("u").putByte(1).putInt(1 << 24).putInt(7).putLong(4096).putByte(0).putString("");
    TransportException bad = assertThrows(TransportException.class,
        () -> GpuEndpoint.decode(new WireReader(id.toByteArray())));
    assertTrue(bad.getMessage().contains("NIC landing: region id 16777216, expected 0..16777214"), bad.getMessage());
  }

  @Test
  void pathPerPairFollowsHostAndDevices() {
    GpuEndpoint a0 = new GpuEndpoint("host-a/b", 0, "p0", "u0", deviceLanding(0, 4096));
    GpuEndpoint a1 = new GpuEndpoint("host-a/b", 1, "p1", "u1", deviceLanding(1, 4096));
    GpuEndpoint b0 = new GpuEndpoint("host-b/b", 0, "p0", "u2", deviceLanding(0, 4096));
    GpuEndpoint aNic = new GpuEndpoint("host-a/c", 0, "p0", "u3", deviceLanding(0, 4096))
        .withNic(new NicLanding(1, 0x1234, 4096));
    GpuEndpoint bNic = new GpuEndpoint("host-b/c", 0, "p0", "u4", deviceLanding(0, 4096))
        .withNic(new NicLanding(1, 0x5678, 4096));
    assertEquals(GpuPath.NVLINK, GpuPath.between(a0, a1));
    assertEquals(GpuPath.STAGED, GpuPath.between(a0, b0));
    assertEquals(GpuPath.GPUNETIO, GpuPath.between(aNic, bNic));
    GpuEndpoint aNic2 = new GpuEndpoint("host-a/c", 1, "p1", "u5", deviceLanding(1, 4096))
        .withNic(new NicLanding(1, 0x9abc, 4096));
    assertEquals(GpuPath.NVLINK, GpuPath.between(aNic, aNic2), "one machine: nvlink unless gpunetio is asked for");
    assertEquals(GpuPath.GPUNETIO, GpuPath.between(aNic, aNic2, true), "gpunetio asked for: the NIC link");
    GpuEndpoint aPlain = new GpuEndpoint("host-a/c", 1, "p1", "u6", deviceLanding(1, 4096));
    assertEquals(GpuPath.NVLINK, GpuPath.between(aNic, aPlain, true), "gpunetio asked for, one side without a NIC");
    assertEquals(GpuPath.STAGED, GpuPath.between(aNic, b0, true));
    assertEquals(GpuPath.STAGED, GpuPath.between(aNic, b0));
    assertEquals(GpuPath.HOST, GpuPath.between(a0, null));
    assertEquals(GpuPath.HOST, GpuPath.between(null, null));
  }

  @Test
  void aBlockServerNeedsAtLeastOneRequestInFlight() {
    assertEquals("push scheduler: 0 requests in flight, expected >= 1",
        assertThrows(IllegalArgumentException.class, () -> new PushScheduler(null, null, null, null, 1, 0))
            .getMessage());
  }
}
