package dev.slipstream.core.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.wire.WireWriter;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** Standalone encodings of the descriptors peers exchange: round trips and forged input. */
class DescriptorCodecTest {
  private static final RegionDescriptor REGION =
      new RegionDescriptor(7, 0x7f00_0000_1000L, 1L << 33, 0xdead_beef_cafe_f00dL, MemoryKind.DEVICE, 3);
  private static final EndpointDescriptor ENDPOINT =
      new EndpointDescriptor("tcp", "exécutor-1.example:7077", new byte[] {0, 1, 2, (byte) 255});

  private static void assertFails(TransportError error, ThrowingDecode decode, String... parts) {
    TransportException e = assertThrows(TransportException.class, decode::run);
    assertEquals(error, e.error(), e.getMessage());
    for (String p : parts) {
      assertTrue(e.getMessage().contains(p), "'" + e.getMessage() + "' should contain '" + p + "'");
    }
  }

  @FunctionalInterface
  private interface ThrowingDecode {
    void run() throws TransportException;
  }

  @Test
  void regionDescriptorRoundTrips() throws Exception {
    byte[] b = REGION.toBytes();
    assertEquals(WireWriter.HEADER_LENGTH + RegionDescriptor.ENCODED_LENGTH, b.length);
    assertEquals(REGION, RegionDescriptor.fromBytes(b));
    RegionDescriptor host = RegionDescriptor.host(1, 0, -1);
    assertEquals(host, RegionDescriptor.fromBytes(host.toBytes()));
  }

  @Test
  void endpointDescriptorRoundTrips() throws Exception {
    assertEquals(ENDPOINT, EndpointDescriptor.fromBytes(ENDPOINT.toBytes()));
    EndpointDescriptor empty = new EndpointDescriptor("loopback", "", null);
    assertEquals(empty, EndpointDescriptor.fromBytes(empty.toBytes()));
  }

  @Test
  void everyTruncationIsMalformed() {
    byte[] region = REGION.toBytes();
    for (int n = 0; n < region.length; n++) {
      byte[] cut = Arrays.copyOf(region, n);
      assertFails(TransportError.MALFORMED, () -> RegionDescriptor.fromBytes(cut), "truncated", "need");
    }
    byte[] endpoint = ENDPOINT.toBytes();
    for (int n = 0; n < endpoint.length; n++) {
      byte[] cut = Arrays.copyOf(endpoint, n);
      assertFails(TransportError.MALFORMED, () -> EndpointDescriptor.fromBytes(cut), "truncated");
    }
  }

  @Test
  void trailingBytesAreMalformed() {
    byte[] region = Arrays.copyOf(REGION.toBytes(), REGION.toBytes().length + 1);
    assertFails(TransportError.MALFORMED, () -> RegionDescriptor.fromBytes(region), "1 trailing bytes, expected none");
    byte[] endpoint = Arrays.copyOf(ENDPOINT.toBytes(), ENDPOINT.toBytes().length + 3);
    assertFails(TransportError.MALFORMED, () -> EndpointDescriptor.fromBytes(endpoint), "3 trailing bytes");
  }

  @Test
  void wrongMagicOrVersionIsBadVersion() {
    byte[] magic = REGION.toBytes();
    magic[1] = 'X';
    assertFails(TransportError.BAD_VERSION, () -> RegionDescriptor.fromBytes(magic), "got magic 0x5358", "expected 0x534c");
    byte[] version = ENDPOINT.toBytes();
    version[2] = 9;
    assertFails(TransportError.BAD_VERSION, () -> EndpointDescriptor.fromBytes(version), "got version 9", "expected 1");
  }

  @Test
  void anotherEncodingsTypeIsUnknownType() {
    assertFails(TransportError.UNKNOWN_TYPE, () -> RegionDescriptor.fromBytes(ENDPOINT.toBytes()),
        "got type id 1, expected 2");
    assertFails(TransportError.UNKNOWN_TYPE, () -> EndpointDescriptor.fromBytes(REGION.toBytes()),
        "got type id 2, expected 1");
  }

  @Test
  void forgedFieldsAreMalformed() {
    byte[] negative = REGION.toBytes();
    ByteBuffer.wrap(negative).putLong(WireWriter.HEADER_LENGTH + 16, -1); // length
    assertFails(TransportError.MALFORMED, () -> RegionDescriptor.fromBytes(negative), "length -1 is negative");
    byte[] kind = REGION.toBytes();
    kind[WireWriter.HEADER_LENGTH + 32] = 9;
    assertFails(TransportError.MALFORMED, () -> RegionDescriptor.fromBytes(kind), "unknown memory kind id 9");
    byte[] hugeName = ENDPOINT.toBytes();
    ByteBuffer.wrap(hugeName).putInt(WireWriter.HEADER_LENGTH, Integer.MAX_VALUE);
    assertFails(TransportError.MALFORMED, () -> EndpointDescriptor.fromBytes(hugeName),
        "transport name length 2147483647 outside [0, " + EndpointDescriptor.MAX_NAME + "]");
    byte[] negativeExtra = new EndpointDescriptor("tcp", "h:1", new byte[2]).toBytes();
    ByteBuffer.wrap(negativeExtra).putInt(negativeExtra.length - 6, -2);
    assertFails(TransportError.MALFORMED, () -> EndpointDescriptor.fromBytes(negativeExtra), "endpoint extra length -2");
  }
}
