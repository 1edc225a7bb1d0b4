package dev.slipstream.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.gpu.shuffle.BatchLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.jupiter.api.Test;

class DeviceTableBlockTest {
  /** A fake device: address BASE maps to index 0 of the array. */
  private static final long BASE = 0x7f00_0000_0000L;

  private record Table(long rows, long address, long bytes, byte[] metadata) implements DeviceTableCodec.DeviceTable {
    @Override
    public void close() {}
  }

  private static DeviceTableBlock.DeviceBytes over(byte[] mem) {
    return (address, dst, off, len) -> {
      long at = address - BASE;
      if (at < 0 || at + len > mem.length) {
        throw new AssertionError("read of [" + at + ", +" + len + ") outside " + mem.length);
      }
      System.arraycopy(mem, (int) at, dst, off, len);
    };
  }

  /** The block's bytes as a writer lays them out (data bytes i filled with value i+1). */
  private static byte[] write(List<Table> tables) {
    DeviceTableBlock.Layout l = DeviceTableBlock.layout(tables);
    byte[] mem = new byte[(int) l.length()];
    System.arraycopy(l.prefix(), 0, mem, 0, l.prefix().length);
    for (int i = 0; i < tables.size(); i++) {
      for (long b = 0; b < tables.get(i).bytes(); b++) {
        mem[(int) (l.dataOffsets()[i] + b)] = (byte) (i + 1);
      }
    }
    return mem;
  }

  @Test
  void tablesComeBackAsTheyWereLaidOut() {
    List<Table> ts = List.of(new Table(10, 1, 1000, new byte[] {1, 2, 3}), new Table(0, 2, 0, new byte[0]),
        new Table(7, 3, 300, new byte[5000]));
    DeviceTableBlock.Layout l = DeviceTableBlock.layout(ts);
    assertEquals(0, l.length() % DeviceTableBlock.BLOCK);
    assertEquals(0, l.prefix().length % DeviceTableBlock.ALIGN);
    // The block travels as a packed block of length / 8 words: the map-output store checks it holds them.
    assertTrue(BatchLayout.packedBytes(l.length() / 8, new int[0]) <= l.length());
    byte[] mem = write(ts);
    List<DeviceTableCodec.LandedTable> got = DeviceTableBlock.parse(BASE, mem.length, over(mem));
    assertEquals(3, got.size());
    for (int i = 0; i < 3; i++) {
      assertEquals(ts.get(i).rows(), got.get(i).rows());
      assertEquals(ts.get(i).bytes(), got.get(i).bytes());
      assertArrayEquals(ts.get(i).metadata(), got.get(i).metadata());
      assertEquals(BASE + l.dataOffsets()[i], got.get(i).address());
      assertEquals(0, l.dataOffsets()[i] % DeviceTableBlock.ALIGN);
    }
    // The prefix (longer than the first read here) was read in two copies, and the data sits where the entries say.
    assertEquals(1, mem[(int) l.dataOffsets()[0]]);
    assertEquals(3, mem[(int) (l.dataOffsets()[2] + 299)]);
    assertTrue(l.dataOffsets()[2] >= l.dataOffsets()[0] + 1000);
  }

  @Test
  void aSmallTableFillsOneBlockOfWholePackedWords() {
    DeviceTableBlock.Layout l = DeviceTableBlock.layout(List.of(new Table(31, 1, 200, new byte[0])));
    assertEquals(DeviceTableBlock.BLOCK, l.length());
    assertEquals(BatchLayout.packedBytes(l.length() / 8, new int[0]), l.length());
    assertEquals(DeviceTableBlock.HEADER + DeviceTableBlock.ENTRY, l.dataOffsets()[0]);
  }

  @Test
  void aPrefixReadByTheCallerGivesTheSameTables() {
    List<Table> ts = List.of(new Table(3, 1, 700, new byte[] {4, 5}), new Table(9, 2, 10, new byte[6000]));
    byte[] mem = write(ts);
    byte[] first = new byte[DeviceTableBlock.firstRead(mem.length)];
    System.arraycopy(mem, 0, first, 0, first.length);
    assertEquals(described(DeviceTableBlock.parse(BASE, mem.length, over(mem))),
        described(DeviceTableBlock.parse(BASE, mem.length, first, over(mem))));
    assertThrows(IllegalArgumentException.class,
        () -> DeviceTableBlock.parse(BASE, mem.length, new byte[16], over(mem)));
  }

  private static List<String> described(List<DeviceTableCodec.LandedTable> ts) {
    return ts.stream().map(t -> t.rows() + " " + t.address() + " " + t.bytes() + " "
        + java.util.Arrays.toString(t.metadata())).toList();
  }

  @Test
  void aBlockWithoutTablesIsNotLaidOut() {
    assertThrows(IllegalArgumentException.class, () -> DeviceTableBlock.layout(List.of()));
  }

  private static String refusal(byte[] mem, long length) {
    return assertThrows(IllegalStateException.class, () -> DeviceTableBlock.parse(BASE, length, over(mem)))
        .getMessage();
  }

  @Test
  void forgedOrTruncatedBlocksAreRefusedWithWhatWasFound() {
    byte[] good = write(List.of(new Table(4, 1, 512, new byte[] {9, 9})));
    assertTrue(refusal(good, 100).contains("a length of 100 bytes"));

    byte[] magic = good.clone();
    magic[0] ^= 1;
    assertTrue(refusal(magic, magic.length).contains("magic 0x"), refusal(magic, magic.length));

    // An entry whose data runs past the end of the block.
    byte[] past = good.clone();
    ByteBuffer.wrap(past).order(ByteOrder.LITTLE_ENDIAN).putLong(DeviceTableBlock.HEADER + 16, 1 << 20);
    assertTrue(refusal(past, past.length).contains("table 0 with 4 rows"), refusal(past, past.length));

    // An entry whose data starts inside the prefix.
    byte[] inside = good.clone();
    ByteBuffer.wrap(inside).order(ByteOrder.LITTLE_ENDIAN).putLong(DeviceTableBlock.HEADER + 8, 0);
    assertTrue(refusal(inside, inside.length).contains("expected rows >= 0 and an aligned range from 56"));

    // More tables than the prefix holds entries for.
    byte[] many = good.clone();
    ByteBuffer.wrap(many).order(ByteOrder.LITTLE_ENDIAN).putInt(8, 1000);
    assertTrue(refusal(many, many.length).contains("1000 tables behind a prefix of 56 bytes"));

    // Metadata longer than the prefix.
    byte[] meta = good.clone();
    ByteBuffer.wrap(meta).order(ByteOrder.LITTLE_ENDIAN).putInt(DeviceTableBlock.HEADER + 24, 10_000);
    assertTrue(refusal(meta, meta.length).contains("10000 metadata bytes"));

    // A prefix claimed longer than the block.
    byte[] prefix = good.clone();
    ByteBuffer.wrap(prefix).order(ByteOrder.LITTLE_ENDIAN).putInt(12, good.length + 256);
    assertTrue(refusal(prefix, prefix.length).contains("behind a prefix of " + (good.length + 256)));
  }
}
