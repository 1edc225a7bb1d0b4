package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The committed output of one map task attempt: the bytes of every reduce partition, one after
 * the other, in registered pages of the map-output store or, when the store's budget was spent,
 * in a local file.
 *
 * <p>Threading: immutable after commit; readers {@link #retain()} it while they read and
 * {@link #release()} after, so pages are not reused under them when the shuffle is removed.
 */
public final class MapOutput implements ServedOutput {
  private final int shuffleId;
  private final long mapId;
  private volatile MapOutputLayout layout;
  private final long[] checksums;
  private final MapOutputStore store;
  private final AtomicInteger refs = new AtomicInteger(1);

  MapOutput(MapOutputStore store, int shuffleId, long mapId, MapOutputLayout layout, long[] checksums) {
    this.checksums = checksums;
    this.store = store;
    this.shuffleId = shuffleId;
    this.mapId = mapId;
    this.layout = layout;
  }

  public int shuffleId() { return shuffleId; }
  public long mapId() { return mapId; }
  @Override
  public int numPartitions() { return layout.numPartitions(); }
  public boolean inMemory() { return layout.inMemory(); }

  public long totalBytes() {
    long t = 0;
    for (int p = 0; p < numPartitions(); p++) {
      t += layout.partitionLength(p);
    }
    return t;
  }

  @Override
  public long partitionLength(int partition) {
    checkPartition(partition);
    return layout.partitionLength(partition);
  }

  /** Whether a checksum was computed for each block as it was written. */
  public boolean hasChecksums() {
    return checksums != null;
  }

  /** The checksum of a whole block (see {@link MapOutputStore#checksumAlgorithm()}); 0 without checksums. */
  @Override
  public long checksum(int partition) {
    checkPartition(partition);
    return checksums == null ? 0 : checksums[partition];
  }

  /** Lengths of every partition, for the MapStatus. */
  public long[] partitionLengths() {
    long[] l = new long[numPartitions()];
    for (int i = 0; i < l.length; i++) {
      l[i] = layout.partitionLength(i);
    }
    return l;
  }

  private void checkPartition(int partition) {
    if (partition < 0 || partition >= numPartitions()) {
      throw new IndexOutOfBoundsException("partition " + partition + " outside [0, " + numPartitions()
          + ") of map output " + shuffleId + "/" + mapId);
    }
  }

  /**
   * Views of {@code length} bytes starting {@code offset} bytes into {@code partition}'s block,
   * in order. Valid while this output is retained.
   *
   * @throws IndexOutOfBoundsException when the range lies outside the block
   */
  @Override
  public List<ByteBuffer> slices(int partition, long offset, long length) throws IOException {
    long blockLength = partitionLength(partition);
    if (offset < 0 || length < 0 || offset > blockLength || length > blockLength - offset) {
      throw new IndexOutOfBoundsException("range offset " + offset + " + length " + length + " outside block "
          + new BlockId(shuffleId, mapId, partition) + " (length " + blockLength + ")");
    }
    if (length == 0) {
      return Collections.emptyList();
    }
    return layout.slices(partition, offset, length);
  }

  /** In one call where the partitions lie in one file or page chain, so adjacent views stay merged. */
  @Override
  public List<ByteBuffer> runSlices(int partition, int endPartition, long offset, long length) throws IOException {
    checkPartition(partition);
    if (endPartition <= partition || endPartition > numPartitions()) {
      throw new IndexOutOfBoundsException("partitions [" + partition + ", " + endPartition + ") outside [0, "
          + numPartitions() + ") of map output " + shuffleId + "/" + mapId);
    }
    MapOutputLayout l = layout;
    if (!(l instanceof MapOutputLayout.Contiguous) || endPartition == partition + 1) {
      return ServedOutput.super.runSlices(partition, endPartition, offset, length);
    }
    long runLength = runLength(partition, endPartition);
    if (offset < 0 || length < 0 || offset > runLength || length > runLength - offset) {
      throw new IndexOutOfBoundsException("range offset " + offset + " + length " + length + " outside partitions ["
          + partition + ", " + endPartition + ") of map output " + shuffleId + "/" + mapId + " (length " + runLength + ")");
    }
    if (length == 0) {
      return Collections.emptyList();
    }
    // Contiguous partitions: the run is one range starting where its first partition starts.
    return l.slices(partition, offset, length);
  }

  /**
   * Moves this output from registered pages to a local file, when nobody but the store holds it.
   * Readers retain an output while they read it, so an output being read is never moved.
   *
   * @return the bytes moved, or -1 when it was not moved (in use, already on disk, or freed)
   */
  long evictToFile() throws IOException {
    MapOutputLayout old;
    long bytes = 0;
    synchronized (this) {
      old = layout;
      if (refs.get() != 1 || !old.inMemory()) {
        return -1;
      }
      int n = old.numPartitions();
      long[] offsets = new long[n + 1];
      SpillFile file = SpillFile.create(store, shuffleId, mapId);
      try {
        for (int p = 0; p < n; p++) {
          offsets[p] = bytes;
          long len = old.partitionLength(p);
          if (len > 0) {
            for (ByteBuffer b : old.slices(p, 0, len)) {
              file.append(b);
            }
          }
          bytes += len;
        }
        offsets[n] = bytes;
        file.finish();
      } catch (IOException | RuntimeException e) {
        file.delete(store);
        throw e;
      }
      layout = new MapOutputLayout.Contiguous(offsets, List.of(), file, 0);
    }
    old.free(store); // returns the pages; the old layout had no files
    return bytes;
  }

  /** A stream over one partition's block (for local reads). Retains this output until closed. */
  public InputStream open(int partition) throws IOException {
    return open(partition, partition + 1);
  }

  /**
   * A stream over the batch block of partitions {@code [partition, endPartition)}, their bytes one
   * after another (for local reads). Retains this output until closed.
   */
  public InputStream open(int partition, int endPartition) throws IOException {
    List<ByteBuffer> parts = runSlices(partition, endPartition, 0, runLength(partition, endPartition));
    retain();
    return new ByteBuffersInputStream(parts, this::release);
  }

  public synchronized void retain() {
    int r;
    do {
      r = refs.get();
      if (r <= 0) {
        throw new IllegalStateException("map output " + shuffleId + "/" + mapId + " was already freed");
      }
    } while (!refs.compareAndSet(r, r + 1));
  }

  @Override
  public void release() {
    MapOutputLayout toFree = null;
    int r;
    synchronized (this) { // never while an eviction swaps the layout
      r = refs.decrementAndGet();
      if (r == 0) {
        toFree = layout;
      }
    }
    if (toFree != null) {
      toFree.free(store);
    } else if (r < 0) {
      throw new IllegalStateException("map output " + shuffleId + "/" + mapId + " released too often");
    }
  }
}
