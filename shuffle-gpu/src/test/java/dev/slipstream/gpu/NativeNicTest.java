package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.nic.NicQpRecord;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The NIC binding without an RDMA device: the Java record codec and the native parser agree on
 * every record (valid and forged), and a missing device is a clear error. Runs wherever the native
 * library was built; the library loads without a GPU or a NIC.
 */
class NativeNicTest {
  @BeforeAll
  static void load() {
    GpuTestSupport.assumeNativeBuilt();
    NativeLibrary.load();
  }

  static byte[] change(byte[] rec, Consumer<ByteBuffer> c) {
    ByteBuffer b = ByteBuffer.wrap(rec.clone()).order(ByteOrder.LITTLE_ENDIAN);
    c.accept(b);
    return b.array();
  }

  @Test
  void javaAndNativeParsersAgreeOnEveryRecord() {
    byte[] good = new NicQpRecord(NicQpRecord.AddressType.ROCE, 0x123, 0, new byte[16], 5, 0x42).encode();
    byte[] ib = new NicQpRecord(NicQpRecord.AddressType.IB, 0x123, 9, new byte[16], 3, 0).encode();
    List<byte[]> cases = List.of(good, ib, new byte[64], new byte[63],
        change(good, b -> b.putInt(0, 0)), change(good, b -> b.putShort(4, (short) 1)),
        change(good, b -> b.putShort(6, (short) 3)), change(good, b -> b.putInt(8, 0)),
        change(good, b -> b.putInt(8, 1 << 24)), change(ib, b -> b.putInt(12, 0)),
        change(ib, b -> b.putInt(12, 1 << 16)), change(good, b -> b.putInt(12, 1 << 16)), change(good, b -> b.putInt(32, 0)),
        change(good, b -> b.putInt(32, 6)), change(good, b -> b.putInt(36, 1 << 24)),
        change(good, b -> b.put(63, (byte) 1)));
    for (int i = 0; i < cases.size(); i++) {
      byte[] rec = cases.get(i);
      String nativeRefusal = NativeNic.nativeRefusal(rec);
      String javaRefusal = null;
      try {
        NicQpRecord.decode(rec);
      } catch (TransportException e) {
        javaRefusal = e.getMessage();
      }
      assertEquals(nativeRefusal == null, javaRefusal == null,
          "case " + i + ": native says " + nativeRefusal + ", Java says " + javaRefusal);
    }
    assertNull(NativeNic.nativeRefusal(good));
  }

  @Test
  void aMissingDeviceIsNamed() {
    String impl = NativeNic.implementation();
    assertTrue(List.of("mlx5", "doca", "none").contains(impl), impl);
    String why = NativeNic.unavailable();
    if (impl.equals("none")) {
      assertTrue(why != null && why.contains("no NIC implementation"), why);
      return;
    }
    assumeTrue(why == null, "rdma-core is not installed here: " + why);
    GpuException e = assertThrows(GpuException.class,
        () -> NativeNic.open("slipstream_no_such_nic", 1, 0, 0, NativeNic.Doorbell.AUTO));
    assertEquals(SlipStatus.SLIP_ERR_NO_DEVICE, e.status());
    assertTrue(e.getMessage().contains("RDMA device slipstream_no_such_nic not found ("), e.getMessage());
  }
}
