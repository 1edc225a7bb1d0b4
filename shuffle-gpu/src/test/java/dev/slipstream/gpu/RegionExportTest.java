package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.MemoryKind;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * The 192-byte region descriptor codec: round trips, and forged or truncated bytes rejected with
 * messages naming what was got and expected. Every case also goes through the native parser
 * (slip_region_desc_parse), so Java never accepts what the library would reject.
 */
class RegionExportTest {

  static RegionExport device() {
    byte[] handle = new byte[64];
    for (int i = 0; i < handle.length; i++) {
      handle[i] = (byte) (i * 7 + 1);
    }
    return new RegionExport(MemoryKind.DEVICE, 7, 1, 0x1234_5678_9abc_def0L, 4L << 20, 4242, handle, "");
  }

  static RegionExport host() {
    return new RegionExport(MemoryKind.HOST_SHARED, 0xfffffffe, -1, -5L, 4096, 77, null, "/slip-77-4294967294-0badf00d");
  }

  @Test
  void roundTripsDeviceAndHostDescriptorsThroughJavaAndTheNativeParser() {
    GpuTestSupport.assumeNativeBuilt();
    NativeLibrary.load();
    for (RegionExport d : new RegionExport[] {device(), host()}) {
      byte[] wire = d.encode();
      assertEquals(RegionExport.BYTES, wire.length);
      assertEquals(d, RegionExport.decode(wire));
      assertArrayEquals(wire, SlipNative.parseDescriptor(wire), "the native parser reads the same struct");
    }
    assertEquals("4294967294", Integer.toUnsignedString(RegionExport.decode(host().encode()).id()));
    assertFalse(device().toString().contains("9abcdef0"), "toString never shows the key: " + device());
  }

  @Test
  void littleEndianAtTheDeclaredOffsets() {
    ByteBuffer b = ByteBuffer.wrap(device().encode()).order(ByteOrder.LITTLE_ENDIAN);
    assertEquals(0x52, b.get(0) & 0xff, "\"SLPR\" little-endian starts with 'R'");
    assertEquals(RegionExport.MAGIC, b.getInt(0));
    assertEquals(1, b.getShort(4));
    assertEquals(MemoryKind.DEVICE.wireId(), b.getShort(6));
    assertEquals(7, b.getInt(8));
    assertEquals(1, b.getInt(12));
    assertEquals(0x1234_5678_9abc_def0L, b.getLong(16));
    assertEquals(4L << 20, b.getLong(24));
    assertEquals(4242, b.getLong(32));
    assertEquals(1, b.get(40));
  }

  @Test
  void truncatedOrOversizedBytesNameTheirLength() {
    byte[] wire = device().encode();
    assertRejected(Arrays.copyOf(wire, 191), "region descriptor of 191 bytes, expected 192", true);
    assertRejected(new byte[0], "region descriptor of 0 bytes, expected 192", true);
    assertRejected(Arrays.copyOf(wire, 193), "region descriptor of 193 bytes, expected 192", true);
  }

  @Test
  void forgedHeaderFieldsAreRejectedByJavaAndByTheLibrary() {
    assertForged(b -> b.putInt(0, 0x41414141), "region descriptor magic 0x41414141, expected 0x534c5052", true);
    assertForged(b -> b.putShort(4, (short) 2), "region descriptor version 2, expected 1", true);
    assertForged(b -> b.putShort(6, (short) 4),
        "region descriptor 7: memory kind 4, expected 2 (device) or 3 (host shared memory)", true);
    assertForged(b -> b.putShort(6, (short) 1),
        "region descriptor 7: memory kind 1, expected 2 (device) or 3 (host shared memory)", true);
    assertForged(b -> b.putLong(24, 0), "region descriptor 7: length 0, expected 1..9223372036854775807", true);
  }

  @Test
  void forgedFieldsTheLibraryToleratesAreStillRejectedByJava() {
    assertForged(b -> b.put(160, (byte) 1),
        "region descriptor 7: reserved bytes 152..191 are not zero (version 1 defines none)", false);
    assertForged(b -> b.putInt(12, -1), "region descriptor 7: device memory on device -1, expected >= 0", false);
    assertForged(b -> b.putLong(24, -1L), "region descriptor 7: length 18446744073709551615, expected"
        + " 1..9223372036854775807", false);
  }

  @Test
  void forgedSharedMemoryNamesAreRejected() {
    byte[] wire = host().encode();
    byte[] unterminated = wire.clone();
    Arrays.fill(unterminated, 104, 152, (byte) 'a');
    unterminated[104] = '/';
    assertRejected(unterminated, "region descriptor 4294967294: shared-memory name is not NUL-terminated within 48"
        + " bytes", true);
    byte[] escaping = wire.clone();
    byte[] name = "/slip-../../etc".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    Arrays.fill(escaping, 104, 152, (byte) 0);
    System.arraycopy(name, 0, escaping, 104, name.length);
    assertRejected(escaping, "region descriptor 4294967294: shared-memory name \"/slip-../../etc\", expected"
        + " \"/slip-...\" (ASCII, no further '/', at most 47 bytes)", true);
    byte[] trailing = wire.clone();
    trailing[151] = 'x';
    assertRejected(trailing, "region descriptor 4294967294: bytes after the shared-memory name's NUL are not zero",
        false);
  }

  @Test
  void constructorRejectsInconsistentFields() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> new RegionExport(MemoryKind.HOST_SHARED, 3, 0, 1, 10, 1, null, "/slip-1"));
    assertEquals("region descriptor 3: host memory on device 0, expected -1", e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> new RegionExport(MemoryKind.DEVICE, 3, 0, 1, 10, 1, new byte[63], ""));
    assertEquals("region descriptor 3: IPC handle of 63 bytes, expected 64", e.getMessage());
  }

  private static void assertForged(Consumer<ByteBuffer> forge, String javaMessage, boolean libraryRejects) {
    byte[] wire = device().encode();
    forge.accept(ByteBuffer.wrap(wire).order(ByteOrder.LITTLE_ENDIAN));
    assertRejected(wire, javaMessage, libraryRejects);
  }

  /** Java rejects with exactly {@code javaMessage}; the library rejects too when it checks that field. */
  private static void assertRejected(byte[] wire, String javaMessage, boolean libraryRejects) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RegionExport.decode(wire));
    assertEquals(javaMessage, e.getMessage());
    if (libraryRejects && NativeLibrary.unbuiltReason() == null) {
      NativeLibrary.load();
      GpuException n = assertThrows(GpuException.class, () -> SlipNative.parseDescriptor(wire));
      assertEquals(SlipStatus.SLIP_ERR_BAD_DESCRIPTOR, n.status());
      assertTrue(n.getMessage().startsWith("region descriptor: SLIP_ERR_BAD_DESCRIPTOR: "), n.getMessage());
    }
  }
}
