package dev.slipstream.spark.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * The bytes of one reduce partition's block in a device-table shuffle: the tables a map task wrote
 * for that partition, behind a prefix that describes them. Little-endian:
 *
 * <pre>
 *   header  u32 magic "SLDT", u16 version (1), u16 0, u32 tables n, u32 prefix bytes P
 *   n entries of 32 bytes: u64 rows, u64 data offset, u64 data bytes, u32 metadata bytes, u32 0
 *   the n metadata byte strings, one after another
 *   (zeros up to P, a multiple of 8), then each table's data at its offset (8-aligned), zeros up to
 *   the block's length (a multiple of 256)
 * </pre>
 *
 * The block's length is a multiple of 256, so it travels as a packed block of 8-byte words with no
 * payload columns ({@code BatchLayout.packed(length / 8)}, whose key column is 256-byte aligned)
 * over every GPU path. {@link #parse} checks everything it reads against the block's length: a
 * block it cannot account for is refused whole.
 */
public final class DeviceTableBlock {
  static final int MAGIC = 0x5444_4c53; // "SLDT" little-endian
  static final short VERSION = 1;
  /** Alignment of the prefix's end and of each table's data. */
  public static final int ALIGN = 8;
  /** Alignment of the block's length: that of a packed block's key column. */
  public static final int BLOCK = 256;
  static final int HEADER = 16;
  static final int ENTRY = 32;
  /** Bytes of a block's start read in one copy: the whole prefix of a block of up to 15 tables. */
  static final int FIRST_READ = 512;
  /** Largest prefix a reader accepts (a writer's prefix holds the metadata of one map task's tables). */
  static final long MAX_PREFIX = 1L << 30;

  private DeviceTableBlock() {}

  /** Reads device bytes into host memory. */
  @FunctionalInterface
  public interface DeviceBytes {
    void read(long address, byte[] dst, int off, int len);
  }

  /** Where the tables of one block go: the prefix to write at 0, each table's data offset, and the block length. */
  public record Layout(byte[] prefix, long[] dataOffsets, long length) {}

  static long align(long x) {
    return (x + ALIGN - 1) & -(long) ALIGN;
  }

  /** The layout of a block holding {@code tables} (at least one). */
  public static Layout layout(List<? extends DeviceTableCodec.DeviceTable> tables) {
    int n = tables.size();
    if (n == 0) {
      throw new IllegalArgumentException("a device-table block holds at least one table");
    }
    long metaBytes = 0;
    for (DeviceTableCodec.DeviceTable t : tables) {
      metaBytes += t.metadata().length;
    }
    long prefix = align(HEADER + (long) n * ENTRY + metaBytes);
    if (prefix > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("device-table block: " + n + " tables with " + metaBytes
          + " metadata bytes, expected a prefix below 2 GiB");
    }
    ByteBuffer b = ByteBuffer.allocate((int) prefix).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(MAGIC).putShort(VERSION).putShort((short) 0).putInt(n).putInt((int) prefix);
    long[] offsets = new long[n];
    long at = prefix;
    for (int i = 0; i < n; i++) {
      DeviceTableCodec.DeviceTable t = tables.get(i);
      if (t.rows() < 0 || t.bytes() < 0) {
        throw new IllegalArgumentException("device table " + i + ": " + t.rows() + " rows, " + t.bytes()
            + " bytes, expected both >= 0");
      }
      offsets[i] = at;
      b.putLong(t.rows()).putLong(at).putLong(t.bytes()).putInt(t.metadata().length).putInt(0);
      at = align(at + t.bytes());
    }
    for (DeviceTableCodec.DeviceTable t : tables) {
      b.put(t.metadata());
    }
    return new Layout(b.array(), offsets, (at + BLOCK - 1) & -(long) BLOCK);
  }

  /** The bytes of a block's start that {@link #parse} reads first: the block's first {@code FIRST_READ}, or all of a shorter one. */
  public static int firstRead(long length) {
    return (int) Math.min(Math.max(length, 0), FIRST_READ);
  }

  /** The tables of the block of {@code length} bytes at device {@code address}. */
  public static List<DeviceTableCodec.LandedTable> parse(long address, long length, DeviceBytes device) {
    checkLength(address, length);
    byte[] first = new byte[firstRead(length)];
    device.read(address, first, 0, first.length);
    return parse(address, length, first, device);
  }

  private static void checkLength(long address, long length) {
    if (length < BLOCK || length % BLOCK != 0) {
      throw refused(address, length, "a length of " + length + " bytes, expected a multiple of " + BLOCK
          + " of at least " + BLOCK);
    }
  }

  /**
   * The tables of the block of {@code length} bytes at device {@code address}, whose first
   * {@link #firstRead} bytes are {@code first} (read by the caller); a longer prefix is read from
   * {@code device}.
   */
  public static List<DeviceTableCodec.LandedTable> parse(long address, long length, byte[] first,
                                                         DeviceBytes device) {
    checkLength(address, length);
    if (first.length != firstRead(length)) {
      throw new IllegalArgumentException("device-table block of " + length + " bytes: " + first.length
          + " first bytes, expected " + firstRead(length));
    }
    ByteBuffer h = ByteBuffer.wrap(first).order(ByteOrder.LITTLE_ENDIAN);
    int magic = h.getInt();
    short version = h.getShort();
    h.getShort();
    long n = Integer.toUnsignedLong(h.getInt());
    long prefix = Integer.toUnsignedLong(h.getInt());
    if (magic != MAGIC || version != VERSION) {
      throw refused(address, length, String.format("magic 0x%08x version %d, expected 0x%08x version %d", magic,
          version, MAGIC, VERSION));
    }
    if (n == 0 || prefix > length || prefix > MAX_PREFIX || prefix % ALIGN != 0 || HEADER + n * ENTRY > prefix) {
      throw refused(address, length, n + " tables behind a prefix of " + prefix + " bytes, expected at least one"
          + " table and a " + ALIGN + "-aligned prefix that holds their entries within the block");
    }
    byte[] p = first;
    if (prefix > first.length) {
      p = new byte[(int) prefix];
      System.arraycopy(first, 0, p, 0, first.length);
      device.read(address + first.length, p, first.length, (int) prefix - first.length);
    }
    ByteBuffer e = ByteBuffer.wrap(p).order(ByteOrder.LITTLE_ENDIAN);
    e.position(HEADER);
    long metaAt = HEADER + n * ENTRY;
    long dataEnd = prefix;
    List<DeviceTableCodec.LandedTable> out = new ArrayList<>((int) n);
    for (int i = 0; i < n; i++) {
      long rows = e.getLong();
      long offset = e.getLong();
      long bytes = e.getLong();
      long meta = Integer.toUnsignedLong(e.getInt());
      e.getInt();
      if (rows < 0 || offset < dataEnd || offset % ALIGN != 0 || bytes < 0 || bytes > length - offset) {
        throw refused(address, length, "table " + i + " with " + rows + " rows at [" + offset + ", +" + bytes
            + "), expected rows >= 0 and an aligned range from " + dataEnd + " within the block");
      }
      if (meta > prefix - metaAt) {
        throw refused(address, length, "table " + i + " with " + meta + " metadata bytes at " + metaAt
            + ", expected them within the prefix of " + prefix);
      }
      byte[] m = new byte[(int) meta];
      System.arraycopy(p, (int) metaAt, m, 0, (int) meta);
      metaAt += meta;
      dataEnd = offset + bytes;
      out.add(new DeviceTableCodec.LandedTable(rows, m, address + offset, bytes));
    }
    return out;
  }

  private static IllegalStateException refused(long address, long length, String what) {
    return new IllegalStateException("device-table block of " + length + " bytes at 0x" + Long.toHexString(address)
        + " refused: " + what);
  }
}
