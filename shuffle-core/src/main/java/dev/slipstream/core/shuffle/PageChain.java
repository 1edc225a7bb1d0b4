package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Bytes appended to a chain of the store's registered pages; when the store has no page left
 * (after moving older outputs to disk), the chain appends what it holds to its output's
 * {@link SpillFile}, returns its pages and goes on in that file, through a heap buffer of
 * {@code fileBuffer} bytes. The chain records where its bytes lie in the file as extents
 * (offset, length), so several chains (the partitions of one output) can share one file.
 *
 * <p>Threading: one writer thread. Ownership: the chain owns its pages until the caller takes
 * them ({@link #pages()}) at commit, or {@link #discard()}s them; the file belongs to the output.
 */
final class PageChain {
  /** Opens the output's spill file on the first spill of any of its chains. */
  interface SpillTarget {
    SpillFile get() throws IOException;
  }

  private final MapOutputStore store;
  private final SpillTarget target;
  private final int fileBuffer;
  private final List<MapOutputStore.Page> pages = new ArrayList<>(1);
  private ByteBuffer current;
  private SpillFile file;
  private byte[] buffer;
  private int buffered;
  private long[] extents;
  private int extentCount;

  PageChain(MapOutputStore store, SpillTarget target, int fileBuffer) {
    this.store = store;
    this.target = target;
    this.fileBuffer = fileBuffer;
  }

  void write(int b) throws IOException {
    if (current != null && current.hasRemaining()) {
      current.put((byte) b);
    } else if (file != null && buffered < buffer.length) {
      buffer[buffered++] = (byte) b;
    } else {
      write(new byte[] {(byte) b}, 0, 1);
    }
  }

  void write(byte[] b, int off, int len) throws IOException {
    if (file != null) {
      toFile(b, off, len);
      return;
    }
    while (len > 0) {
      if (current == null || !current.hasRemaining()) {
        MapOutputStore.Page p = store.allocatePage();
        if (p == null) {
          spillToFile();
          toFile(b, off, len);
          return;
        }
        pages.add(p);
        current = p.view();
      }
      int n = Math.min(len, current.remaining());
      current.put(b, off, n);
      off += n;
      len -= n;
    }
  }

  /** Through the buffer; a write at least a buffer long goes to the file without a copy. */
  private void toFile(byte[] b, int off, int len) throws IOException {
    if (len >= buffer.length) {
      flush();
      append(ByteBuffer.wrap(b, off, len));
      return;
    }
    if (len > buffer.length - buffered) {
      flush();
    }
    System.arraycopy(b, off, buffer, buffered, len);
    buffered += len;
  }

  /** Moves the bytes in pages to the output's file (straight from the pages) and frees them. */
  private void spillToFile() throws IOException {
    file = target.get();
    buffer = new byte[fileBuffer];
    long pageBytes = store.pageBytes();
    long inPages = pages.isEmpty() ? 0 : (pages.size() - 1) * pageBytes + current.position();
    long copied = 0;
    for (MapOutputStore.Page p : pages) {
      int n = (int) Math.min(pageBytes, inPages - copied);
      append(p.view().limit(n));
      copied += n;
    }
    store.freePages(pages);
    pages.clear();
    current = null;
  }

  private void append(ByteBuffer src) throws IOException {
    int n = src.remaining();
    if (n == 0) {
      return;
    }
    long at = file.append(src);
    if (extentCount > 0 && extents[2 * extentCount - 2] + extents[2 * extentCount - 1] == at) {
      extents[2 * extentCount - 1] += n; // right after this chain's last extent: one extent
      return;
    }
    if (extents == null) {
      extents = new long[8];
    } else if (2 * extentCount == extents.length) {
      extents = Arrays.copyOf(extents, extents.length * 2);
    }
    extents[2 * extentCount] = at;
    extents[2 * extentCount + 1] = n;
    extentCount++;
  }

  /** Writes what the buffer holds to the file (nothing before a spill). */
  void flush() throws IOException {
    if (buffered > 0) {
      int n = buffered;
      buffered = 0;
      append(ByteBuffer.wrap(buffer, 0, n));
    }
  }

  /** The pages holding the bytes (empty once spilled). */
  List<MapOutputStore.Page> pages() {
    return List.copyOf(pages);
  }

  /** Whether the bytes are in the output's file rather than in pages. */
  boolean spilled() {
    return file != null;
  }

  /**
   * Where the bytes lie in the output's file, in order, as (offset, length) pairs; null while
   * they are in pages. Call after {@link #flush()}.
   */
  long[] extents() {
    if (file == null) {
      return null;
    }
    return extents == null ? new long[0] : Arrays.copyOf(extents, 2 * extentCount);
  }

  /** Returns the pages and drops the buffer (the output deletes its file). */
  void discard() {
    store.freePages(pages);
    pages.clear();
    current = null;
    buffer = null;
    buffered = 0;
  }
}
