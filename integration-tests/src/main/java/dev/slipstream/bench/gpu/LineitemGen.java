package dev.slipstream.bench.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;

/**
 * A lineitem-shaped table for the GPU shuffle job: key {@code l_orderkey} (int64) and six
 * fixed-width payload columns, generated deterministically per map task, so the GPU path and the
 * host path shuffle the same rows. Also the row checksum both paths use to compare partitions as
 * multisets (count, sum and xor of a 64-bit hash per row: independent of row order).
 */
public final class LineitemGen {
  /** l_partkey, l_suppkey, l_quantity (x100), l_extendedprice (cents), l_discount (%), l_tax (%). */
  public static final int[] WIDTHS = {8, 4, 8, 8, 4, 4};
  public static final int PAYLOAD_BYTES = 36;
  public static final int ROW_BYTES = 8 + PAYLOAD_BYTES;

  private LineitemGen() {}

  /** Fills {@code keys} and {@code payload} (36 bytes per row, columns in order, little-endian) for map {@code map}. */
  public static void generate(long seed, int map, int rows, long[] keys, byte[] payload) {
    SplittableRandom r = new SplittableRandom(seed * 1_000_003L + map);
    ByteBuffer p = ByteBuffer.wrap(payload).order(ByteOrder.LITTLE_ENDIAN);
    long orders = Math.max(1, (long) rows / 4);
    for (int i = 0; i < rows; i++) {
      keys[i] = 1 + r.nextLong(orders * 64);
      int at = i * PAYLOAD_BYTES;
      long part = 1 + r.nextLong(200_000);
      long qty = (1 + r.nextInt(50)) * 100L;
      p.putLong(at, part);
      p.putInt(at + 8, 1 + r.nextInt(10_000));
      p.putLong(at + 12, qty);
      p.putLong(at + 20, qty * (90_000 + part % 20_001) / 100);
      p.putInt(at + 28, r.nextInt(11));
      p.putInt(at + 32, r.nextInt(9));
    }
  }

  static long mix(long k) {
    k ^= k >>> 33;
    k *= 0xff51afd7ed558ccdL;
    k ^= k >>> 33;
    k *= 0xc4ceb9fe1a85ec53L;
    k ^= k >>> 33;
    return k;
  }

  /** The hash of one row: its key and its 36 payload bytes at {@code at}. */
  public static long rowHash(long key, ByteBuffer payload, int at) {
    long h = mix(key);
    h = mix(h ^ payload.getLong(at));
    h = mix(h ^ payload.getLong(at + 8));
    h = mix(h ^ payload.getLong(at + 16));
    h = mix(h ^ payload.getLong(at + 24));
    return mix(h ^ payload.getInt(at + 32));
  }

  /** Per-partition multiset checksum: rows, sum and xor of row hashes. */
  public record Checksum(int partition, long rows, long sum, long xor) implements java.io.Serializable {
    public Checksum plus(Checksum o) {
      return new Checksum(partition, rows + o.rows, sum + o.sum, xor ^ o.xor);
    }
  }
}
