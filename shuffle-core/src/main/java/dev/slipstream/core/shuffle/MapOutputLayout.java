package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Where a committed map output's bytes live. Ranges passed in are already checked against the
 * partition's length.
 */
interface MapOutputLayout {
  int numPartitions();

  long partitionLength(int partition);

  /** Views of {@code [offset, offset + length)} of the partition, in order. */
  List<ByteBuffer> slices(int partition, long offset, long length) throws IOException;

  boolean inMemory();

  /** Returns pages to the store and deletes files. Called once. */
  void free(MapOutputStore store);

  /** Views of {@code [start, start + length)} of a chain of equal-sized pages. */
  static List<ByteBuffer> pageSlices(List<MapOutputStore.Page> pages, long pageBytes, long start, long length) {
    List<ByteBuffer> out = new ArrayList<>();
    long pos = start;
    long end = start + length;
    while (pos < end) {
      int pageIndex = (int) (pos / pageBytes);
      int inPage = (int) (pos % pageBytes);
      int n = (int) Math.min(pageBytes - inPage, end - pos);
      ByteBuffer b = pages.get(pageIndex).view();
      b.position(inPage).limit(inPage + n);
      out.add(b.slice());
      pos += n;
    }
    return out;
  }

  static void delete(MapOutputStore store, Path file) {
    try {
      Files.deleteIfExists(file);
    } catch (IOException e) {
      store.logDeleteFailure(file, e);
    }
  }

  /** Partitions one after another, in pages or (after a spill) in one file. */
  record Contiguous(long[] offsets, List<MapOutputStore.Page> pages, SpillFile file, long pageBytes)
      implements MapOutputLayout {
    @Override public int numPartitions() { return offsets.length - 1; }

    @Override public long partitionLength(int p) { return offsets[p + 1] - offsets[p]; }

    @Override
    public List<ByteBuffer> slices(int p, long offset, long length) throws IOException {
      long start = offsets[p] + offset;
      return file != null ? file.slices(start, length) : pageSlices(pages, pageBytes, start, length);
    }

    @Override public boolean inMemory() { return file == null; }

    @Override
    public void free(MapOutputStore store) {
      store.freePages(pages);
      if (file != null) {
        file.delete(store);
      }
    }
  }

  /**
   * Each partition in its own chain of pages or, for the partitions that spilled, in extents of
   * the output's one file: {@code extents[p]} holds (offset, length) pairs in order, null for a
   * partition in pages.
   */
  record PerPartition(long[] lengths, List<List<MapOutputStore.Page>> pages, long[][] extents, SpillFile file,
                      long pageBytes) implements MapOutputLayout {
    @Override public int numPartitions() { return lengths.length; }

    @Override public long partitionLength(int p) { return lengths[p]; }

    @Override
    public List<ByteBuffer> slices(int p, long offset, long length) throws IOException {
      long[] e = extents[p];
      if (e == null) {
        return pageSlices(pages.get(p), pageBytes, offset, length);
      }
      List<ByteBuffer> out = new ArrayList<>();
      long skip = offset;
      long left = length;
      for (int i = 0; i < e.length && left > 0; i += 2) {
        long extent = e[i + 1];
        if (skip >= extent) {
          skip -= extent;
          continue;
        }
        long n = Math.min(extent - skip, left);
        out.addAll(file.slices(e[i] + skip, n));
        skip = 0;
        left -= n;
      }
      return out;
    }

    @Override
    public boolean inMemory() {
      return file == null;
    }

    @Override
    public void free(MapOutputStore store) {
      for (List<MapOutputStore.Page> p : pages) {
        store.freePages(p);
      }
      if (file != null) {
        file.delete(store);
      }
    }
  }
}
