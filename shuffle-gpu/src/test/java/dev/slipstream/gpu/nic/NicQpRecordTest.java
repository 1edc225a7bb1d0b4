package dev.slipstream.gpu.nic;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/** The queue-pair record and the offer that carries them: round trips, and every forged field refused. */
class NicQpRecordTest {
  static final byte[] GID = {(byte) 0xfe, (byte) 0x80, 0, 0, 0, 0, 0, 0, 2, 0x42, (byte) 0xac, (byte) 0xff,
      (byte) 0xfe, 0x11, 0, 2};

  static NicQpRecord roce() {
    return new NicQpRecord(NicQpRecord.AddressType.ROCE, 0x1a2b3c, 0, GID, 5, 0xabcdef);
  }

  /** The record's bytes with one change. */
  static byte[] forged(Consumer<ByteBuffer> change) {
    ByteBuffer b = ByteBuffer.wrap(roce().encode()).order(ByteOrder.LITTLE_ENDIAN);
    change.accept(b);
    return b.array();
  }

  static String refused(byte[] bytes) {
    return assertThrows(TransportException.class, () -> NicQpRecord.decode(bytes)).getMessage();
  }

  @Test
  void roundTripsInTheNativeLayout() throws Exception {
    NicQpRecord r = roce();
    byte[] b = r.encode();
    assertEquals(64, b.length);
    ByteBuffer le = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
    assertEquals(0x51504C53, le.getInt(0), "magic at 0");
    assertEquals(2, le.getShort(4), "version at 4");
    assertEquals(1, le.getShort(6), "RoCE at 6");
    assertEquals(0x1a2b3c, le.getInt(8), "qpn at 8");
    assertEquals((byte) 0xfe, b[16], "gid at 16");
    assertEquals(5, le.getInt(32), "mtu at 32");
    assertEquals(0xabcdef, le.getInt(36), "psn at 36");
    assertEquals(r, NicQpRecord.decode(b));
    NicQpRecord ib = new NicQpRecord(NicQpRecord.AddressType.IB, 7, 0x12, new byte[16], 4, 0);
    assertEquals(ib, NicQpRecord.decode(ib.encode()));
  }

  @Test
  void forgedFieldsAreRefusedWithWhatWasExpected() {
    assertTrue(refused(new byte[63]).contains("of 63 bytes, expected 64"));
    assertTrue(refused(forged(b -> b.putInt(0, 0x51504C54))).contains("magic 0x51504c54, expected 0x51504c53"));
    TransportException v = assertThrows(TransportException.class,
        () -> NicQpRecord.decode(forged(b -> b.putShort(4, (short) 1))));
    assertEquals(TransportError.BAD_VERSION, v.error());
    assertTrue(refused(forged(b -> b.putShort(6, (short) 2))).contains("address type 2, expected 0 (IB) or 1 (RoCE)"));
    assertTrue(refused(forged(b -> b.putInt(8, 1 << 24))).contains("queue-pair number 16777216, expected 1..0xffffff"));
    assertTrue(refused(forged(b -> b.putInt(8, 0))).contains("queue-pair number 0"));
    assertTrue(refused(forged(b -> b.putShort(6, (short) 0))).contains("IB LID 0, expected 1..0xffff"));
    assertTrue(refused(forged(b -> b.putInt(32, 6))).contains("path MTU code 6, expected 1..5"));
    assertTrue(refused(forged(b -> b.putInt(36, 1 << 24))).contains("packet sequence number 0x1000000, expected 24 bits"));
    assertTrue(refused(forged(b -> b.put(50, (byte) 1))).contains("reserved byte 10 is 0x1, expected 0"));
  }

  @Test
  void offersRoundTripAndRefuseForgedCounts() throws Exception {
    NicOffer o = new NicOffer("3", "5", 42, 0, List.of(roce(), roce()));
    WireWriter w = new WireWriter(256);
    o.encode(w);
    NicOffer back = NicOffer.decode(new WireReader(w.toByteArray()));
    assertEquals(o, back);
    WireWriter bad = new WireWriter(64).putByte(NicOffer.VERSION).putString("3").putString("5").putLong(42).putLong(0)
        .putInt(NicOffer.MAX_QUEUES + 1);
    assertThrows(TransportException.class, () -> NicOffer.decode(new WireReader(bad.toByteArray())));
    WireWriter zero = new WireWriter(128).putByte(NicOffer.VERSION).putString("3").putString("5").putLong(0)
        .putLong(0).putInt(1).putBytes(roce().encode());
    TransportException z = assertThrows(TransportException.class, () -> NicOffer.decode(new WireReader(zero.toByteArray())));
    assertTrue(z.getMessage().contains("nonce 0, expected a link's nonzero nonce"), z.getMessage());
    assertThrows(IllegalArgumentException.class, () -> new NicOffer("3", "3", 1, 0, List.of(roce())));
  }
}
