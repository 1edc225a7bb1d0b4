package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.gpu.RegionDescriptor;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Codecs of the GPU shuffle: batch layout, device write request, GPU endpoint; and the per-pair path decision. */
class GpuShuffleCodecTest {
  static RegionDescriptor deviceLanding(int device, long length) {
    byte[] ipc = new byte[RegionDescriptor.IPC_HANDLE_BYTES];
    Arrays.fill(ipc, (byte) 7);
    return RegionDescriptor.decode(new RegionDescriptor(MemoryKind.DEVICE, 1, device, 0x1234_5678_9abcL, length, 4242,
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

  private static DeviceWriteRequest request(long landingLength, List<DeviceWriteRequest.Entry> entries, long table,
      long signal) {
    return new DeviceWriteRequest(9, 3, deviceLanding(1, landingLength), table, signal, new int[] {8, 4}, entries);
  }

  @Test
  void deviceWriteRequestRoundTripsAndIsChecked() throws TransportException {
    var req = request(1 << 20, List.of(new DeviceWriteRequest.Entry(77, 5, 0, 4096),
        new DeviceWriteRequest.Entry(78, 5, 4096, 160)), 8192, 8192 + 48);
    assertEquals(req, DeviceWriteRequest.decode(req.encode()));
    assertArrayEquals(new int[] {8, 4}, DeviceWriteRequest.decode(req.encode()).widths());
    var sent = req.from("7", 2_000);
    var got = DeviceWriteRequest.decode(sent.encode());
    assertEquals(sent, got);
    assertEquals("7", got.reader());
    assertEquals(2_000, got.budgetMillis());
    assertNotEquals(req, got, "the reader and the budget are part of the request");
  }

  @Test
  void deviceWriteRequestRefusesABudgetOutOfRangeAndAnOverlongReader() {
    var req = request(1 << 20, List.of(new DeviceWriteRequest.Entry(77, 5, 0, 4096)), 8192, 8192 + 32);
    assertEquals("MALFORMED: device write request: budget -1 ms, expected 0.." + DeviceWriteRequest.MAX_BUDGET_MILLIS,
        assertThrows(TransportException.class, () -> DeviceWriteRequest.decode(req.from("1", -1).encode()))
            .getMessage());
    assertEquals("MALFORMED: device write request: reader id of 65 characters, expected at most 64",
        assertThrows(TransportException.class, () -> req.from("x".repeat(65), 1).check()).getMessage());
  }

  @Test
  void blocksArePushedInPiecesThatTheSignalCountsOneEach() throws TransportException {
    long c = DeviceWriteRequest.CHUNK_BYTES;
    assertEquals(1, DeviceWriteRequest.chunks(16));
    assertEquals(1, DeviceWriteRequest.chunks(c));
    assertEquals(2, DeviceWriteRequest.chunks(c + 16));
    var req = request(64L << 20, List.of(new DeviceWriteRequest.Entry(1, 0, 0, 16),
        new DeviceWriteRequest.Entry(1, 1, 16, c), new DeviceWriteRequest.Entry(2, 0, 16 + c, c + 16),
        new DeviceWriteRequest.Entry(2, 1, 32 + 2 * c, 3 * c)), 32 + 5 * c, 32 + 5 * c + 80);
    req.check();
    assertEquals(1 + 1 + 2 + 3 + 1, req.expectedBlocks(), "pieces of every block, plus the table");
    var tooMany = request(Long.MAX_VALUE / 2, List.of(new DeviceWriteRequest.Entry(1, 0, 0, (1L << 24) * c)), 0, 64);
    assertEquals("MALFORMED: device write request: 16777217 pieces of 1048576 bytes to signal, expected at most"
        + " 16777215 (the signal's block count)", assertThrows(TransportException.class, tooMany::check).getMessage());
  }

  @Test
  void deviceWriteRequestRefusesRangesOutsideOverlappingOrMisaligned() {
    var outside = request(8192, List.of(new DeviceWriteRequest.Entry(1, 0, 4096, 8192)), 0, 64);
    assertEquals("MALFORMED: device write request: block (1, 0): offset 4096 + length 8192 outside landing region 1 (length 8192)",
        assertThrows(TransportException.class, outside::check).getMessage());
    var overlap = request(8192, List.of(new DeviceWriteRequest.Entry(1, 0, 0, 128)), 64, 4096);
    assertEquals("MALFORMED: device write request: landing ranges overlap: [0, 128) and [64, 96)",
        assertThrows(TransportException.class, overlap::check).getMessage());
    var misaligned = request(8192, List.of(new DeviceWriteRequest.Entry(1, 0, 8, 16)), 1024, 2048);
    assertEquals("MALFORMED: device write request: landing offset 8 not 16-byte aligned",
        assertThrows(TransportException.class, misaligned::check).getMessage());
    var signal = request(8192, List.of(new DeviceWriteRequest.Entry(1, 0, 0, 16)), 1024, 8190);
    assertEquals("MALFORMED: device write request: signal offset 8190 not 8-byte aligned",
        assertThrows(TransportException.class, signal::check).getMessage());
    var negative = request(8192, List.of(new DeviceWriteRequest.Entry(1, 0, 0, -16)), 1024, 2048);
    assertTrue(assertThrows(TransportException.class, negative::check).getMessage().contains("length -16 outside"));
  }

  @Test
  void deviceWriteRequestDecodeRejectsTruncatedForgedAndHostLandings() throws TransportException {
    var req = request(1 << 20, List.of(new DeviceWriteRequest.Entry(77, 5, 0, 4096)), 8192, 8192 + 16);
    byte[] bytes = req.encode();
    var e = assertThrows(TransportException.class, () -> DeviceWriteRequest.decode(Arrays.copyOf(bytes, bytes.length - 3)));
    assertEquals("MALFORMED: device write request: 25 bytes for 1 entries, expected 28", e.getMessage());
    byte[] longer = Arrays.copyOf(bytes, bytes.length + 1);
    assertEquals("MALFORMED: device write request: 29 bytes for 1 entries, expected 28",
        assertThrows(TransportException.class, () -> DeviceWriteRequest.decode(longer)).getMessage());
    byte[] type = bytes.clone();
    type[3] = 16;
    assertTrue(assertThrows(TransportException.class, () -> DeviceWriteRequest.decode(type)).getMessage()
        .endsWith("got type id 16, expected 48"));
    var host = new DeviceWriteRequest(1, 1, RegionDescriptor.decode(new RegionDescriptor(MemoryKind.HOST_SHARED, 2, -1, 5,
        4096, 1, null, "/slip-test").encode()), 1024, 2048, new int[] {}, List.of(new DeviceWriteRequest.Entry(1, 0, 0, 16)));
    assertEquals("MALFORMED: device write request: landing region 2 is HOST_SHARED memory, expected DEVICE",
        assertThrows(TransportException.class, host::check).getMessage());
  }

  @Test
  void gpuEndpointRoundTripsAndRejectsForgedFields() throws TransportException {
    GpuEndpoint g = new GpuEndpoint("host-a/boot-1", 1, "0000:1b:00.0", "GPU-0123", false, deviceLanding(1, 1 << 20));
    WireWriter w = new WireWriter(512);
    g.encode(w);
    byte[] bytes = w.toByteArray();
    WireReader r = new WireReader(bytes);
    assertEquals(g, GpuEndpoint.decode(r));
    r.expectEnd("endpoint");
    byte[] version = bytes.clone();
    version[0] = 1;
    assertEquals("BAD_VERSION: GPU endpoint: version 1, expected 3",
        assertThrows(TransportException.class, () -> GpuEndpoint.decode(new WireReader(version))).getMessage());
    byte[] truncated = Arrays.copyOf(bytes, bytes.length - 10);
    assertThrows(TransportException.class, () -> GpuEndpoint.decode(new WireReader(truncated)));
    var e = assertThrows(IllegalArgumentException.class,
        () -> new GpuEndpoint("h", 0, "p", "u", false, deviceLanding(1, 4096)));
    assertEquals("GPU endpoint: landing region 1 is DEVICE memory on device 1, expected DEVICE memory on device 0",
        e.getMessage());
    String ring = "/dev/shm/slipstream-ring-" + "0123456789abcdef".repeat(2);
    GpuEndpoint withRing = new GpuEndpoint("host-a/boot-1", 1, "p", "u", false, deviceLanding(1, 4096), ring);
    WireWriter w2 = new WireWriter(512);
    withRing.encode(w2);
    assertEquals(withRing, GpuEndpoint.decode(new WireReader(w2.toByteArray())));
    for (String forged : new String[] {"/etc/passwd", "slipstream-ring-" + "0".repeat(32), "/dev/shm/slipstream-ring-x"}) {
      assertEquals("GPU endpoint: request ring '" + forged + "', expected none or an absolute path of at most 1024"
          + " characters to a file named slipstream-ring-<32 hex digits>",
          assertThrows(IllegalArgumentException.class,
              () -> new GpuEndpoint("h", 1, "p", "u", false, deviceLanding(1, 4096), forged)).getMessage());
    }
  }

  @Test
  void aGpuEndpointSharesItsLandingAndRingWithExecutorsOfItsMachineOnly() throws TransportException {
    String ring = "/dev/shm/slipstream-ring-" + "0123456789abcdef".repeat(2);
    GpuEndpoint g = new GpuEndpoint("host-a/boot-1", 1, "p", "u", false, deviceLanding(1, 4096), ring);
    GpuEndpoint sameHost = new GpuEndpoint("host-a/boot-1", 0, "p0", "u0", false, deviceLanding(0, 4096));
    GpuEndpoint otherHost = new GpuEndpoint("host-b/boot-2", 1, "p1", "u1", false, deviceLanding(1, 4096));
    GpuEndpoint rebooted = new GpuEndpoint("host-a/boot-2", 0, "p0", "u0", false, deviceLanding(0, 4096));
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
      assertTrue(wire.length < RegionDescriptor.BYTES, "the wire form carries no descriptor: " + wire.length + " bytes");
    }
    assertEquals(GpuPath.STAGED, GpuPath.between(otherHost, g.sharedWith(otherHost)), "enough to choose the path");
  }

  @Test
  void pathPerPairFollowsHostAndDevices() {
    GpuEndpoint a0 = new GpuEndpoint("host-a/b", 0, "p0", "u0", false, deviceLanding(0, 4096));
    GpuEndpoint a1 = new GpuEndpoint("host-a/b", 1, "p1", "u1", false, deviceLanding(1, 4096));
    GpuEndpoint b0 = new GpuEndpoint("host-b/b", 0, "p0", "u2", false, deviceLanding(0, 4096));
    GpuEndpoint aNic = new GpuEndpoint("host-a/c", 0, "p0", "u3", true, deviceLanding(0, 4096));
    GpuEndpoint bNic = new GpuEndpoint("host-b/c", 0, "p0", "u4", true, deviceLanding(0, 4096));
    assertEquals(GpuPath.NVLINK, GpuPath.between(a0, a1));
    assertEquals(GpuPath.STAGED, GpuPath.between(a0, b0));
    assertEquals(GpuPath.GPUNETIO, GpuPath.between(aNic, bNic));
    assertEquals(GpuPath.STAGED, GpuPath.between(aNic, b0));
    assertEquals(GpuPath.HOST, GpuPath.between(a0, null));
    assertEquals(GpuPath.HOST, GpuPath.between(null, null));
  }

  @Test
  void aBlockServerNeedsAtLeastOneRequestInFlight() {
    assertEquals("device block server: 0 requests in flight, expected >= 1",
        assertThrows(IllegalArgumentException.class, () -> new DeviceBlockServer(null, null, null, null, 1, 0))
            .getMessage());
  }
}
