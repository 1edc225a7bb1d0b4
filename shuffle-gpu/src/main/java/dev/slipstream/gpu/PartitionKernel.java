package dev.slipstream.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The hash partition of {@code native/src/partition.cu} ({@code slip_partition}), called through JNI:
 * an int64 key column and up to 8 fixed-width payload columns of a device-resident batch go into
 * {@code nparts} contiguous blocks of the output, block p at {@code offsets[p]} holding
 * {@code counts[p]} rows in the packed layout (keys, then each column, each section 16-byte aligned).
 * Rows go to {@code slip_partition_of(key, nparts)} (murmur3 finaliser, multiply-shift), the same
 * function as {@link #partitionOf}.
 *
 * <p>Threading: any thread; the call blocks (polling) until the kernel is done or the timeout passes.
 */
public final class PartitionKernel {
  public static final int MAX_PARTITIONS = 4096;

  private PartitionKernel() {}

  /** Where the rows went: byte offset and row count of each block (offsets has nparts + 1 entries). */
  public record Result(long[] offsets, long[] counts) {
    public int partitions() {
      return counts.length;
    }

    public long blockBytes(int p) {
      return offsets[p + 1] - offsets[p];
    }
  }

  /** Bytes the output needs at most, and the scratch the kernel needs, for this shape. */
  public static long[] sizes(long rows, int[] widths, int nparts) {
    return SlipNative.partitionSizes(widths, rows, nparts);
  }

  /**
   * Partitions {@code rows} rows (keys at {@code keys}, column c at {@code cols[c]}, all device
   * addresses of {@code ctx}'s device) into {@code out} (capacity {@code outCap}, 16-byte aligned).
   */
  public static Result partition(GpuContext ctx, long keys, long rows, int[] widths, long[] cols, int nparts,
      long out, long outCap, long timeoutMs) {
    if (nparts <= 0 || nparts > MAX_PARTITIONS) {
      throw new IllegalArgumentException("partition into " + nparts + " partitions, expected 1.." + MAX_PARTITIONS);
    }
    long[] sz = sizes(rows, widths, nparts);
    if (outCap < sz[0]) {
      throw new IllegalArgumentException("partition output of " + outCap + " bytes, expected at least " + sz[0]);
    }
    try (DeviceBuffer meta = ctx.allocate(8L * (2L * nparts + 1));
        DeviceBuffer scratch = ctx.allocate(Math.max(16, sz[1]))) {
      ctx.makeCurrent();
      long offsetsAt = meta.address();
      long countsAt = offsetsAt + 8L * (nparts + 1);
      SlipNative.partition(ctx.device(), keys, rows, widths, cols, nparts, out, outCap, offsetsAt, countsAt,
          scratch.address(), scratch.length(), timeoutMs);
      ByteBuffer b = ByteBuffer.wrap(meta.read(0, (int) meta.length())).order(ByteOrder.LITTLE_ENDIAN);
      long[] offsets = new long[nparts + 1];
      long[] counts = new long[nparts];
      for (int p = 0; p <= nparts; p++) {
        offsets[p] = b.getLong();
      }
      for (int p = 0; p < nparts; p++) {
        counts[p] = b.getLong();
      }
      for (int p = 0; p < nparts; p++) {
        if (offsets[p + 1] < offsets[p] || offsets[p + 1] > outCap) {
          throw new GpuException(SlipStatus.SLIP_ERR_STATE, "partition: block " + p + " at [" + offsets[p] + ", "
              + offsets[p + 1] + "), expected ascending offsets within the output of " + outCap + " bytes");
        }
      }
      return new Result(offsets, counts);
    }
  }

  /** The partition of a key, as the kernel computes it ({@code slip_partition_of} in slipstream/abi.h). */
  public static int partitionOf(long key, int nparts) {
    long k = key;
    k ^= k >>> 33;
    k *= 0xff51afd7ed558ccdL;
    k ^= k >>> 33;
    k *= 0xc4ceb9fe1a85ec53L;
    k ^= k >>> 33;
    return (int) (((k >>> 32) * (nparts & 0xffffffffL)) >>> 32);
  }
}
