package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.io.OutputStream;
import java.util.List;

/**
 * Writes one map task attempt's output, partition after partition, into store pages, spilling
 * to a file when the store's budget is spent. Partitions must be written in increasing order;
 * partitions never opened are empty.
 *
 * <p>Threading: one task thread. Ownership: {@link #commit()} hands the bytes to the store;
 * {@link #abort()} frees them. Exactly one of the two must be called.
 */
public final class MapOutputWriter {
  private final MapOutputStore store;
  private final int shuffleId;
  private final long mapId;
  private final long[] offsets;
  private final long[] checksums;
  private final java.util.zip.Checksum checksum;
  private final long pageBytes;
  private final PageChain chain;
  private SpillFile file;
  private long position;
  private int nextPartition;
  private boolean done;

  /** The store's removal mark when the map task began (see {@link MapOutputStore#publish}). */
  private final long begun;

  MapOutputWriter(MapOutputStore store, int shuffleId, long mapId, int numPartitions, long begun) {
    this.begun = begun;
    if (numPartitions < 0) {
      throw new IllegalArgumentException("numPartitions " + numPartitions + " is negative");
    }
    this.store = store;
    this.shuffleId = shuffleId;
    this.mapId = mapId;
    this.offsets = new long[numPartitions + 1];
    this.checksum = store.checksumAlgorithm().newChecksum();
    this.checksums = checksum == null ? null : new long[numPartitions];
    this.pageBytes = store.pageBytes();
    this.chain = new PageChain(store, () -> file = SpillFile.create(store, shuffleId, mapId), 1 << 16);
  }

  /**
   * A stream for {@code partition}'s bytes. Closing it ends the partition; the next call must
   * name a higher partition.
   */
  public OutputStream openPartition(int partition) {
    if (done) {
      throw new IllegalStateException("map output " + shuffleId + "/" + mapId + " is already committed or aborted");
    }
    if (partition < nextPartition || partition >= offsets.length - 1) {
      throw new IllegalArgumentException("partition " + partition + ": expected one in [" + nextPartition
          + ", " + (offsets.length - 1) + ") (partitions are written in increasing order)");
    }
    for (int p = nextPartition; p <= partition; p++) {
      offsets[p] = position;
      endChecksum(p - 1);
    }
    nextPartition = partition + 1;
    return new OutputStream() {
      private boolean closed;

      @Override
      public void write(int b) throws IOException {
        append(new byte[] {(byte) b}, 0, 1);
      }

      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        if (closed) {
          throw new IOException("partition " + partition + " stream is closed");
        }
        append(b, off, len);
      }

      @Override
      public void close() {
        closed = true;
      }
    };
  }

  /** Records the checksum of {@code partition} (all its bytes are written) and restarts it. */
  private void endChecksum(int partition) {
    if (checksum != null && partition >= 0 && partition < checksums.length) {
      checksums[partition] = checksum.getValue();
      checksum.reset();
    }
  }

  private void append(byte[] b, int off, int len) throws IOException {
    position += len;
    if (checksum != null) {
      checksum.update(b, off, len);
    }
    chain.write(b, off, len);
  }

  /** Bytes written so far. */
  public long position() {
    return position;
  }

  /** Publishes the output in the store and returns it (not retained for the caller). */
  public MapOutput commit() throws IOException {
    if (done) {
      throw new IllegalStateException("map output " + shuffleId + "/" + mapId + " is already committed or aborted");
    }
    for (int p = nextPartition; p < offsets.length; p++) {
      offsets[p] = position;
      endChecksum(p - 1);
    }
    MapOutputLayout layout;
    if (file == null) {
      layout = new MapOutputLayout.Contiguous(offsets, chain.pages(), null, pageBytes);
    } else {
      try {
        chain.flush();
        file.finish();
        long[] e = chain.extents();
        if (e.length != 2 || e[0] != 0 || e[1] != position) { // the only chain appending: one run from 0
          throw new IllegalStateException("map output " + shuffleId + "/" + mapId + ": spill file holds extents "
              + java.util.Arrays.toString(e) + ", expected one of " + position + " bytes from offset 0");
        }
      } catch (IOException | RuntimeException e) {
        abort();
        throw e;
      }
      store.onSpill(position);
      layout = new MapOutputLayout.Contiguous(offsets, List.of(), file, pageBytes);
    }
    done = true;
    MapOutput out = new MapOutput(store, shuffleId, mapId, layout, checksums);
    store.publish(out, begun);
    return out;
  }

  /** Frees everything written. Idempotent; a no-op after commit. */
  public void abort() {
    if (done) {
      return;
    }
    done = true;
    chain.discard();
    if (file != null) {
      file.delete(store);
    }
  }
}
