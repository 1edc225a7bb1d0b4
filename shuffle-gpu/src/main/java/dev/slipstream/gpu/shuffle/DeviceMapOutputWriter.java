package dev.slipstream.gpu.shuffle;

import dev.slipstream.gpu.DeviceBuffer;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.PartitionKernel;
import java.util.Arrays;
import java.util.List;

/**
 * The map side of a GPU shuffle: the batches a map task produced are hash-partitioned on the
 * device ({@link PartitionKernel}) straight into a block of the {@link DeviceMapOutputStore} and
 * committed there under the task attempt's id. Several batches are first concatenated on the
 * device (one packed batch), so each reduce partition is one contiguous section.
 *
 * <p>Threading: the task thread. Ownership: does not close the batches.
 */
public final class DeviceMapOutputWriter {
  private DeviceMapOutputWriter() {}

  /**
   * Partitions {@code batches} (each on {@code ctx}'s device, with payload widths {@code widths})
   * into {@code nparts} blocks and commits them; returns each partition's bytes (for the MapStatus)
   * and rows.
   */
  public static long[][] write(GpuContext ctx, DeviceMapOutputStore store, int shuffleId, long mapAttemptId,
      List<DeviceBatch> batches, int nparts, int[] widths, long timeoutMs) {
    long rows = 0;
    for (DeviceBatch b : batches) {
      if (b.device() != ctx.device()) {
        throw new IllegalArgumentException("GPU shuffle " + shuffleId + ": a batch on device " + b.device()
            + ", expected this executor's device " + ctx.device());
      }
      if (!Arrays.equals(b.layout().widths(), widths)) {
        throw new IllegalArgumentException("GPU shuffle " + shuffleId + ": a batch with payload widths "
            + Arrays.toString(b.layout().widths()) + ", expected " + Arrays.toString(widths));
      }
      rows += b.rows();
    }
    DeviceBuffer merged = null;
    try {
      DeviceBatch in;
      if (batches.size() == 1) {
        in = batches.get(0);
      } else {
        BatchLayout l = BatchLayout.packed(rows, widths);
        merged = ctx.allocate(Math.max(16, l.bufferBytes()));
        long at = 0;
        for (DeviceBatch b : batches) {
          merged.copyFromDevice(l.keyOffset() + at * 8, b.keys(), b.rows() * 8);
          for (int c = 0; c < widths.length; c++) {
            merged.copyFromDevice(l.offset(c) + at * widths[c], b.column(c), b.rows() * widths[c]);
          }
          at += b.rows();
        }
        in = DeviceBatch.view(ctx.device(), merged.address(), l);
      }
      long bound = PartitionKernel.sizes(rows, widths, nparts)[0];
      OutputSpace.Block block = store.allocate(Math.max(16, bound));
      try {
        long[] cols = new long[widths.length];
        for (int c = 0; c < widths.length; c++) {
          cols[c] = in.column(c);
        }
        PartitionKernel.Result r = rows == 0
            ? new PartitionKernel.Result(new long[nparts + 1], new long[nparts])
            : PartitionKernel.partition(ctx, in.keys(), rows, widths, cols, nparts, block.address(), block.length(),
                timeoutMs);
        store.commit(shuffleId, mapAttemptId, block, widths, r.offsets(), r.counts());
        long[] bytes = new long[nparts];
        for (int p = 0; p < nparts; p++) {
          bytes[p] = r.blockBytes(p);
        }
        return new long[][] {bytes, r.counts()};
      } catch (RuntimeException e) {
        block.close(); // uncommitted: returns its memory
        throw e;
      }
    } finally {
      if (merged != null) {
        merged.close();
      }
    }
  }
}
