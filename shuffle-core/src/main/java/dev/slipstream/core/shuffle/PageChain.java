package dev.slipstream.core.shuffle;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Bytes appended to a chain of the store's registered pages; when the store has no page left
 * (after moving older outputs to disk), the chain copies what it holds into a local file, returns
 * its pages and goes on in the file.
 *
 * <p>Threading: one writer thread. Ownership: the chain owns its pages and file until the caller
 * takes them ({@link #pages()}, {@link #file()}) at commit, or {@link #discard()}s them.
 */
final class PageChain {
  private final MapOutputStore store;
  private final int shuffleId;
  private final long mapId;
  private final int fileBuffer;
  private final List<MapOutputStore.Page> pages = new ArrayList<>(1);
  private ByteBuffer current;
  private Path file;
  private OutputStream fileOut;

  PageChain(MapOutputStore store, int shuffleId, long mapId, int fileBuffer) {
    this.store = store;
    this.shuffleId = shuffleId;
    this.mapId = mapId;
    this.fileBuffer = fileBuffer;
  }

  void write(int b) throws IOException {
    if (current != null && current.hasRemaining()) {
      current.put((byte) b);
    } else {
      write(new byte[] {(byte) b}, 0, 1);
    }
  }

  void write(byte[] b, int off, int len) throws IOException {
    if (fileOut != null) {
      fileOut.write(b, off, len);
      return;
    }
    while (len > 0) {
      if (current == null || !current.hasRemaining()) {
        MapOutputStore.Page p = store.allocatePage();
        if (p == null) {
          spillToFile();
          fileOut.write(b, off, len);
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

  private void spillToFile() throws IOException {
    file = store.newSpillFile(shuffleId, mapId);
    fileOut = new BufferedOutputStream(Files.newOutputStream(file), fileBuffer);
    long pageBytes = store.pageBytes();
    long inPages = pages.isEmpty() ? 0 : (pages.size() - 1) * pageBytes + current.position();
    byte[] tmp = new byte[(int) pageBytes];
    long copied = 0;
    for (MapOutputStore.Page p : pages) {
      int n = (int) Math.min(pageBytes, inPages - copied);
      p.view().get(tmp, 0, n);
      fileOut.write(tmp, 0, n);
      copied += n;
    }
    store.freePages(pages);
    pages.clear();
    current = null;
  }

  /** The pages holding the bytes (empty once spilled). */
  List<MapOutputStore.Page> pages() {
    return List.copyOf(pages);
  }

  /** The file holding the bytes, or null while they are in pages. */
  Path file() {
    return file;
  }

  /** Flushes and closes the file, if the chain spilled. */
  void closeFile() throws IOException {
    if (fileOut != null) {
      fileOut.close();
    }
  }

  /** Returns the pages and deletes the file. */
  void discard() {
    store.freePages(pages);
    pages.clear();
    current = null;
    if (fileOut != null) {
      try {
        fileOut.close();
      } catch (IOException e) {
        store.logDeleteFailure(file, e);
      }
      MapOutputLayout.delete(store, file);
    }
  }
}
