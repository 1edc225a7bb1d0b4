package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.List;

/**
 * Writes one map task attempt's output with every partition open at once: each partition fills
 * its own chain of registered pages as records arrive, so nothing is sorted or concatenated.
 * When the store's budget is spent, the partition that needs a page moves to the output's one local
 * file ({@link SpillFile}) and goes on there; partitions that spill share that file as extents.
 *
 * <p>Threading: one task thread; a partition's stream may be written by another thread meanwhile
 * (one at a time, handed over with a happens-before edge, as {@link EncodeLanes} does), and all
 * writing must have ended before commit or abort. The shared spill file is created and appended
 * under locks. Ownership: {@link #commit()} hands the bytes to the store; {@link #abort()} frees
 * them; exactly one of the two must be called.
 */
public final class PartitionedOutputWriter {
  private final MapOutputStore store;
  private final int shuffleId;
  private final long mapId;
  private final long pageBytes;
  private final PartitionStream[] streams;
  private SpillFile file;
  private volatile boolean done;

  private final class PartitionStream extends OutputStream {
    final java.util.zip.Checksum checksum = store.checksumAlgorithm().newChecksum();
    final PageChain chain = new PageChain(store, PartitionedOutputWriter.this::spillFile, 1 << 15);
    long length;

    @Override
    public void write(int b) throws IOException {
      checkOpen();
      chain.write(b);
      length++;
      if (checksum != null) {
        checksum.update(b);
      }
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      checkOpen();
      chain.write(b, off, len);
      length += len;
      if (checksum != null) {
        checksum.update(b, off, len);
      }
    }

    private void checkOpen() throws IOException {
      if (done) {
        throw new IOException("map output " + shuffleId + "/" + mapId + " is already committed or aborted");
      }
    }

    @Override
    public void close() {
      // Partitions stay open until commit; closing a serializer stream over this is harmless.
    }
  }

  /** The store's removal mark when the map task began (see {@link MapOutputStore#publish}). */
  private final long begun;

  PartitionedOutputWriter(MapOutputStore store, int shuffleId, long mapId, int numPartitions, long begun) {
    this.begun = begun;
    if (numPartitions < 0) {
      throw new IllegalArgumentException("numPartitions " + numPartitions + " is negative");
    }
    this.store = store;
    this.shuffleId = shuffleId;
    this.mapId = mapId;
    this.pageBytes = store.pageBytes();
    this.streams = new PartitionStream[numPartitions];
  }

  /** The stream of {@code partition}, created on first use; valid until commit or abort. */
  public OutputStream partition(int partition) {
    if (partition < 0 || partition >= streams.length) {
      throw new IllegalArgumentException("partition " + partition + " outside [0, " + streams.length + ")");
    }
    PartitionStream s = streams[partition];
    if (s == null) {
      s = new PartitionStream();
      streams[partition] = s;
    }
    return s;
  }

  /** Bytes written so far over all partitions. */
  public long bytesWritten() {
    long t = 0;
    for (PartitionStream s : streams) {
      t += s == null ? 0 : s.length;
    }
    return t;
  }

  /** The output's one spill file, created when its first partition runs out of pages. */
  private synchronized SpillFile spillFile() throws IOException {
    if (file == null) {
      file = SpillFile.create(store, shuffleId, mapId);
    }
    return file;
  }

  /** Publishes the output in the store and returns it (not retained for the caller). */
  public MapOutput commit() throws IOException {
    if (done) {
      throw new IllegalStateException("map output " + shuffleId + "/" + mapId + " is already committed or aborted");
    }
    long[] lengths = new long[streams.length];
    long[] checksums = store.checksumAlgorithm() == ChecksumAlgorithm.NONE ? null : new long[streams.length];
    List<List<MapOutputStore.Page>> pages = new ArrayList<>(streams.length);
    long[][] extents = new long[streams.length][];
    long spilled = 0;
    try {
      for (int p = 0; p < streams.length; p++) {
        PartitionStream s = streams[p];
        if (s == null) {
          pages.add(List.of());
          if (checksums != null) {
            checksums[p] = store.checksumAlgorithm().newChecksum().getValue();
          }
          continue;
        }
        lengths[p] = s.length;
        if (checksums != null) {
          checksums[p] = s.checksum.getValue();
        }
        pages.add(s.chain.pages());
        if (s.chain.spilled()) {
          s.chain.flush();
          extents[p] = s.chain.extents();
          spilled += s.length;
        }
      }
      if (file != null) {
        file.finish();
      }
    } catch (IOException | RuntimeException e) {
      abort();
      throw e;
    }
    done = true;
    if (spilled > 0) {
      store.onSpill(spilled);
    }
    MapOutputLayout layout = file == null ? compact(lengths, pages) : null;
    if (layout == null) {
      layout = new MapOutputLayout.PerPartition(lengths, pages, extents, file, pageBytes);
    }
    MapOutput out = new MapOutput(store, shuffleId, mapId, layout, checksums);
    store.publish(out, begun);
    return out;
  }

  /**
   * Packs the partitions one after another into as few pages as their bytes need, when the
   * per-partition chains waste pages: every non-empty partition starts its own page, so a map
   * output of many small partitions would otherwise hold a page per partition for its lifetime
   * (200 partitions of 1 KiB: 200 pages for 200 KiB). Copying costs one pass over the bytes
   * while they are still in cache; it is done only when it frees at least a quarter of the
   * pages (and at least two), and only from free pages (never by moving other outputs to disk).
   *
   * @return the packed layout (the chains' pages are then freed), or null to keep the chains
   */
  private MapOutputLayout compact(long[] lengths, List<List<MapOutputStore.Page>> pages) {
    int used = 0;
    long total = 0;
    for (int p = 0; p < lengths.length; p++) {
      used += pages.get(p).size();
      total += lengths[p];
    }
    int packed = (int) ((total + pageBytes - 1) / pageBytes);
    if (used - packed < Math.max(2, used / 4)) {
      return null;
    }
    List<MapOutputStore.Page> target = new ArrayList<>(packed);
    for (int i = 0; i < packed; i++) {
      MapOutputStore.Page page = store.tryAllocatePage();
      if (page == null) {
        store.freePages(target);
        return null;
      }
      target.add(page);
    }
    long[] offsets = new long[lengths.length + 1];
    long at = 0;
    for (int p = 0; p < lengths.length; p++) {
      offsets[p] = at;
      if (lengths[p] == 0) {
        continue;
      }
      List<java.nio.ByteBuffer> dst = MapOutputLayout.pageSlices(target, pageBytes, at, lengths[p]);
      int d = 0;
      for (java.nio.ByteBuffer src : MapOutputLayout.pageSlices(pages.get(p), pageBytes, 0, lengths[p])) {
        while (src.hasRemaining()) {
          java.nio.ByteBuffer out = dst.get(d);
          if (!out.hasRemaining()) {
            out = dst.get(++d);
          }
          int n = Math.min(src.remaining(), out.remaining());
          out.put(src.slice(src.position(), n));
          src.position(src.position() + n);
        }
      }
      at += lengths[p];
    }
    offsets[lengths.length] = at;
    for (List<MapOutputStore.Page> chain : pages) {
      store.freePages(chain);
    }
    return new MapOutputLayout.Contiguous(offsets, target, null, pageBytes);
  }

  /** Frees everything written. Idempotent; a no-op after commit. */
  public void abort() {
    if (done) {
      return;
    }
    done = true;
    for (PartitionStream s : streams) {
      if (s != null) {
        s.chain.discard();
      }
    }
    if (file != null) {
      file.delete(store);
    }
  }
}
