package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * A committed map output as the block server reads it to serve a write request: its blocks'
 * lengths and checksums and views of their bytes. {@link MapOutput} (the host path's map-output
 * store) is one; a {@link Source} registered with {@link ShuffleNode#serveAlso} provides others,
 * such as GPU map outputs served over the host transport (the GPU shuffle's staging path).
 *
 * <p>Threading: the server retains an output on one of its threads, reads it there, and releases
 * it once the writes that read its views have completed (possibly on a transport thread).
 */
public interface ServedOutput {
  int numPartitions();

  /** Bytes of {@code partition}'s block as served. */
  long partitionLength(int partition);

  /** The checksum of the whole served block (the node's {@link ChecksumAlgorithm}); 0 without checksums. */
  long checksum(int partition);

  /**
   * Views of {@code length} bytes starting {@code offset} bytes into {@code partition}'s block, in
   * order; valid until {@link #release()}.
   *
   * @throws IndexOutOfBoundsException when the range lies outside the block
   */
  List<ByteBuffer> slices(int partition, long offset, long length) throws IOException;

  /** Bytes of partitions {@code [partition, endPartition)} together: the length of that batch block. */
  default long runLength(int partition, int endPartition) {
    long n = 0;
    for (int p = partition; p < endPartition; p++) {
      n += partitionLength(p);
    }
    return n;
  }

  /**
   * Views of {@code length} bytes starting {@code offset} bytes into the run of partitions
   * {@code [partition, endPartition)} taken one after another (a batch block), in order; valid
   * until {@link #release()}.
   *
   * @throws IndexOutOfBoundsException when the range lies outside the run
   */
  default List<ByteBuffer> runSlices(int partition, int endPartition, long offset, long length) throws IOException {
    if (endPartition == partition + 1) {
      return slices(partition, offset, length);
    }
    long runLength = runLength(partition, endPartition);
    if (offset < 0 || length < 0 || offset > runLength || length > runLength - offset) {
      throw new IndexOutOfBoundsException("range offset " + offset + " + length " + length + " outside partitions ["
          + partition + ", " + endPartition + ") (length " + runLength + ")");
    }
    List<ByteBuffer> out = new java.util.ArrayList<>();
    long start = 0; // of the current partition within the run
    long from = offset;
    long end = offset + length;
    for (int p = partition; p < endPartition && from < end; p++) {
      long len = partitionLength(p);
      if (from < start + len) {
        long n = Math.min(end, start + len) - from;
        out.addAll(slices(p, from - start, n));
        from += n;
      }
      start += len;
    }
    return out;
  }

  /** Ends one retention: views handed out may no longer be read. */
  void release();

  /** Map outputs kept outside the host map-output store. */
  @FunctionalInterface
  interface Source {
    /**
     * The output of {@code mapId} retained for serving (release it when done), or null when this
     * source does not have it.
     */
    ServedOutput retain(int shuffleId, long mapId) throws IOException;
  }
}
