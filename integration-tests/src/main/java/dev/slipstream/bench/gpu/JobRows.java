package dev.slipstream.bench.gpu;

import dev.slipstream.gpu.PartitionKernel;
import dev.slipstream.gpu.shuffle.BatchLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Iterator;
import java.util.concurrent.ConcurrentHashMap;
import scala.Tuple2;

/**
 * The GPU shuffle job's rows on both paths: generated once per executor JVM, packed as the device
 * batch layout, and checksummed the same way from a device batch's bytes and from host records, so
 * the two paths' results can be compared partition by partition.
 */
final class JobRows {
  private JobRows() {}

  /** Generated rows, cached per executor JVM so that timed jobs measure the shuffle, not generation. */
  record Rows(long[] keys, byte[] payload, byte[] packed) {}

  private static final ConcurrentHashMap<String, Rows> ROWS =
      new ConcurrentHashMap<>();

  static Rows rows(long seed, int map, int rows) {
    return ROWS.computeIfAbsent(seed + "/" + map + "/" + rows, k -> {
      long[] keys = new long[rows];
      byte[] payload = new byte[rows * LineitemGen.PAYLOAD_BYTES];
      LineitemGen.generate(seed, map, rows, keys, payload);
      return new Rows(keys, payload, pack(keys, payload, rows));
    });
  }

  /** The packed layout (keys, then each column, 16-byte aligned sections) of generated rows. */
  static byte[] pack(long[] keys, byte[] payload, int rows) {
    BatchLayout l = BatchLayout.packed(rows, LineitemGen.WIDTHS);
    ByteBuffer out = ByteBuffer.allocate((int) l.bufferBytes()).order(ByteOrder.LITTLE_ENDIAN);
    ByteBuffer p = ByteBuffer.wrap(payload).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < rows; i++) {
      out.putLong(8 * i, keys[i]);
    }
    int colAt = 0;
    for (int c = 0; c < LineitemGen.WIDTHS.length; c++) {
      int w = LineitemGen.WIDTHS[c];
      int base = (int) l.offset(c);
      for (int i = 0; i < rows; i++) {
        out.put(base + w * i, payload, i * LineitemGen.PAYLOAD_BYTES + colAt, w);
      }
      colAt += w;
    }
    return out.array();
  }

  /** The checksum of a packed batch's rows ({@code raw} laid out as {@code layout}). */
  static LineitemGen.Checksum checksum(byte[] raw, BatchLayout layout, int p, int parts) {
    int n = (int) layout.rows();
    ByteBuffer in = ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN);
    ByteBuffer row = ByteBuffer.allocate(LineitemGen.PAYLOAD_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    long sum = 0;
    long xor = 0;
    for (int i = 0; i < n; i++) {
      long key = in.getLong((int) layout.keyOffset() + 8 * i);
      if (PartitionKernel.partitionOf(key, parts) != p) {
        throw new IllegalStateException("key " + key + " in partition " + p + ", expected partition "
            + PartitionKernel.partitionOf(key, parts));
      }
      int at = 0;
      for (int c = 0; c < LineitemGen.WIDTHS.length; c++) {
        int w = LineitemGen.WIDTHS[c];
        row.put(at, raw, (int) layout.offset(c) + w * i, w);
        at += w;
      }
      long h = LineitemGen.rowHash(key, row, 0);
      sum += h;
      xor ^= h;
    }
    return new LineitemGen.Checksum(p, n, sum, xor);
  }

  /** The checksum of host records (key, 36 payload bytes). */
  static LineitemGen.Checksum hostChecksum(Iterator<Tuple2<Long, byte[]>> it, int p) {
    long n = 0;
    long sum = 0;
    long xor = 0;
    while (it.hasNext()) {
      Tuple2<Long, byte[]> r = it.next();
      long h = LineitemGen.rowHash(r._1(), ByteBuffer.wrap(r._2()).order(ByteOrder.LITTLE_ENDIAN), 0);
      n++;
      sum += h;
      xor ^= h;
    }
    return new LineitemGen.Checksum(p, n, sum, xor);
  }
}
