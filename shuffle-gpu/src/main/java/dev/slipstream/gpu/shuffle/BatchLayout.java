package dev.slipstream.gpu.shuffle;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * Host metadata of a device-resident columnar batch held in one contiguous device buffer: an int64
 * key column and fixed-width payload columns, each at a byte offset of the buffer. This is the
 * shape of cudf's {@code contiguous_split} output (one device buffer plus host metadata), so a RAPIDS
 * batch maps onto it by reading its column offsets; {@link #packed} is the layout the partition
 * kernel writes for each block ({@code native/include/slipstream/kernels.h}: keys at 0, then each
 * column, each section 16-byte aligned).
 *
 * <p>Immutable; the constructor checks every offset against the buffer.
 */
public record BatchLayout(long rows, long keyOffset, int[] widths, long[] offsets, long bufferBytes) {
  public static final int MAX_COLUMNS = 8;
  static final int MAGIC = 0x4c42_4c53; // "SLBL" little-endian
  static final byte VERSION = 1;

  public BatchLayout {
    if (rows < 0 || rows >= (1L << 32)) {
      throw new IllegalArgumentException("batch layout: " + rows + " rows, expected 0..2^32-1");
    }
    if (widths.length != offsets.length || widths.length > MAX_COLUMNS) {
      throw new IllegalArgumentException("batch layout: " + widths.length + " widths and " + offsets.length
          + " offsets, expected the same number, at most " + MAX_COLUMNS);
    }
    if (bufferBytes < 0) {
      throw new IllegalArgumentException("batch layout: buffer of " + bufferBytes + " bytes, expected >= 0");
    }
    checkColumn("key column", keyOffset, 8, rows, bufferBytes);
    for (int c = 0; c < widths.length; c++) {
      int w = widths[c];
      if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16) {
        throw new IllegalArgumentException("batch layout: column " + c + " width " + w + ", expected 1, 2, 4, 8 or 16");
      }
      checkColumn("column " + c, offsets[c], w, rows, bufferBytes);
    }
    widths = widths.clone();
    offsets = offsets.clone();
  }

  private static void checkColumn(String what, long offset, int width, long rows, long bufferBytes) {
    if (offset < 0 || offset % width != 0) {
      throw new IllegalArgumentException("batch layout: " + what + " at offset " + offset
          + ", expected >= 0 and aligned to its width " + width);
    }
    long bytes = rows * width;
    if (offset > bufferBytes || bytes > bufferBytes - offset) {
      throw new IllegalArgumentException("batch layout: " + what + " at offset " + offset + " + " + bytes
          + " bytes outside the buffer of " + bufferBytes + " bytes");
    }
  }

  static long align16(long x) {
    return (x + 15) & ~15L;
  }

  /** The partition kernel's block layout for {@code rows} rows: keys at 0, then each column, 16-byte aligned. */
  public static BatchLayout packed(long rows, int... widths) {
    long[] offsets = new long[widths.length];
    long at = align16(rows * 8);
    for (int c = 0; c < widths.length; c++) {
      offsets[c] = at;
      at += align16(rows * widths[c]);
    }
    return new BatchLayout(rows, 0, widths, offsets, at);
  }

  /** Bytes of one packed block of {@code rows} rows with these payload widths. */
  public static long packedBytes(long rows, int[] widths) {
    long at = align16(rows * 8);
    for (int w : widths) {
      at += align16(rows * w);
    }
    return at;
  }

  public int columns() {
    return widths.length;
  }

  public int width(int c) {
    return widths[c];
  }

  public long offset(int c) {
    return offsets[c];
  }

  @Override
  public int[] widths() {
    return widths.clone();
  }

  @Override
  public long[] offsets() {
    return offsets.clone();
  }

  /** Bytes of one row: the key and every payload column. */
  public long rowBytes() {
    long b = 8;
    for (int w : widths) {
      b += w;
    }
    return b;
  }

  public int encodedLength() {
    return 4 + 1 + 8 + 8 + 8 + 4 + widths.length * 12;
  }

  public byte[] encode() {
    ByteBuffer b = ByteBuffer.allocate(encodedLength()).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(MAGIC).put(VERSION).putLong(rows).putLong(keyOffset).putLong(bufferBytes).putInt(widths.length);
    for (int c = 0; c < widths.length; c++) {
      b.putInt(widths[c]).putLong(offsets[c]);
    }
    return b.array();
  }

  /** Decodes {@link #encode()}'s bytes; truncated, oversized or forged input names what was got and expected. */
  public static BatchLayout decode(byte[] bytes) {
    final int fixed = 4 + 1 + 8 + 8 + 8 + 4;
    if (bytes.length < fixed) {
      throw new IllegalArgumentException("batch layout: " + bytes.length + " bytes, expected at least " + fixed);
    }
    ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    int magic = b.getInt();
    if (magic != MAGIC) {
      throw new IllegalArgumentException("batch layout: magic 0x" + Integer.toHexString(magic) + ", expected 0x"
          + Integer.toHexString(MAGIC));
    }
    byte version = b.get();
    if (version != VERSION) {
      throw new IllegalArgumentException("batch layout: version " + version + ", expected " + VERSION);
    }
    long rows = b.getLong();
    long keyOffset = b.getLong();
    long bufferBytes = b.getLong();
    int n = b.getInt();
    if (n < 0 || n > MAX_COLUMNS) {
      throw new IllegalArgumentException("batch layout: " + n + " columns, expected 0.." + MAX_COLUMNS);
    }
    if (bytes.length != fixed + 12 * n) {
      throw new IllegalArgumentException("batch layout: " + bytes.length + " bytes for " + n + " columns, expected "
          + (fixed + 12 * n));
    }
    int[] widths = new int[n];
    long[] offsets = new long[n];
    for (int c = 0; c < n; c++) {
      widths[c] = b.getInt();
      offsets[c] = b.getLong();
    }
    return new BatchLayout(rows, keyOffset, widths, offsets, bufferBytes);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof BatchLayout l && rows == l.rows && keyOffset == l.keyOffset && bufferBytes == l.bufferBytes
        && Arrays.equals(widths, l.widths) && Arrays.equals(offsets, l.offsets);
  }

  @Override
  public int hashCode() {
    return Long.hashCode(rows) * 31 + Arrays.hashCode(widths) * 17 + Arrays.hashCode(offsets);
  }

  @Override
  public String toString() {
    return "BatchLayout[rows=" + rows + ", keyOffset=" + keyOffset + ", widths=" + Arrays.toString(widths)
        + ", offsets=" + Arrays.toString(offsets) + ", bufferBytes=" + bufferBytes + "]";
  }
}
