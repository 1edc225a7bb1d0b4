package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * The one local file a map output's bytes spill into: the writer appends ranges to it (from any of
 * its partitions, in any order, each range recorded by the caller as an extent), then
 * {@link #finish()}es it; readers take views of it, mapped once per file in windows of up to
 * {@link #WINDOW} bytes on the first read. One file per output, however many partitions spill,
 * keeps the cost of a spill to one file creation and one mapping.
 *
 * <p>Threading: appends and finish from the writer's threads (partitions encoded on lanes append
 * concurrently: appends are serialized here); {@link #slices} from any thread after finish.
 * Ownership: the output's layout deletes the file when the output is freed; mappings go with the
 * views (the JDK unmaps them when they are collected).
 */
final class SpillFile {
  /** The most bytes one mapping covers; views that cross a window boundary come in two pieces. */
  static final long WINDOW = 1L << 30;

  private final Path path;
  private final long window;
  private FileChannel out;
  private long size;
  private ByteBuffer[] windows;

  private SpillFile(Path path, long window, FileChannel out) {
    this.path = path;
    this.window = window;
    this.out = out;
  }

  /** A new, empty file for map output {@code shuffleId/mapId} in the store's spill folder. */
  static SpillFile create(MapOutputStore store, int shuffleId, long mapId) throws IOException {
    Path p = null;
    try {
      p = store.newSpillFile(shuffleId, mapId);
      return create(p, WINDOW);
    } catch (IOException e) {
      throw new IOException("map output " + shuffleId + "/" + mapId + " needs a spill file (the map-output store's"
          + " budget is spent) and could not create " + (p != null ? p : "one in " + store.spillDir()) + ": " + e, e);
    }
  }

  /** A new, empty file at {@code path}, mapped in windows of {@code window} bytes. */
  static SpillFile create(Path path, long window) throws IOException {
    if (window <= 0 || window > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("spill file window of " + window + " bytes, expected 1.." + Integer.MAX_VALUE);
    }
    return new SpillFile(path, window, FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE));
  }

  /** Bytes appended so far. */
  synchronized long size() {
    return size;
  }

  /** Appends {@code src}'s remaining bytes (consuming them) and returns the offset they start at. */
  synchronized long append(ByteBuffer src) throws IOException {
    if (out == null) {
      throw new IllegalStateException("spill file " + path + " is finished; no more appends");
    }
    long at = size;
    while (src.hasRemaining()) {
      size += out.write(src);
    }
    return at;
  }

  /** Ends writing: closes the file for appends. Idempotent. */
  synchronized void finish() throws IOException {
    if (out != null) {
      FileChannel c = out;
      out = null;
      c.close();
    }
  }

  /**
   * Views of {@code [start, start + length)}, in order; the caller has checked the range against
   * what it appended.
   */
  List<ByteBuffer> slices(long start, long length) throws IOException {
    ByteBuffer[] w = windows();
    List<ByteBuffer> views = new ArrayList<>(1);
    long pos = start;
    long end = start + length;
    while (pos < end) {
      int i = (int) (pos / window);
      int in = (int) (pos % window);
      int n = (int) Math.min(w[i].capacity() - in, end - pos);
      views.add(w[i].slice(in, n));
      pos += n;
    }
    return views;
  }

  private synchronized ByteBuffer[] windows() throws IOException {
    if (windows == null) {
      if (out != null) {
        throw new IllegalStateException("spill file " + path + " is read before its writer finished it");
      }
      int n = (int) ((size + window - 1) / window);
      ByteBuffer[] w = new ByteBuffer[n];
      try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
        for (int i = 0; i < n; i++) {
          long at = i * window;
          w[i] = ch.map(FileChannel.MapMode.READ_ONLY, at, Math.min(window, size - at));
        }
      }
      windows = w;
    }
    return windows;
  }

  /** Closes the file if still open and deletes it (a failure is logged through the store). */
  void delete(MapOutputStore store) {
    try {
      finish();
    } catch (IOException e) {
      store.logDeleteFailure(path, e);
    }
    MapOutputLayout.delete(store, path);
  }
}
