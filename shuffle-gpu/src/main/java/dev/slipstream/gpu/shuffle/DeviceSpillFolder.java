package dev.slipstream.gpu.shuffle;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * The disk tier of {@link DeviceMapOutputStore}: whole outputs moved out of device or host memory
 * into a file each in one folder, read back in chunks, every read checking the file holds exactly
 * the output's bytes. It counts the bytes and moves it holds and keeps why the last move failed,
 * for the store's error when a budget cannot be met.
 *
 * <p>Threading: under the store's lock. Ownership: files are deleted when their output is dropped;
 * the folder itself goes with the executor's local directories.
 */
final class DeviceSpillFolder {
  private static final int CHUNK = 4 << 20;

  private final Path dir;
  private long bytes;
  private long spills;
  private long fileSeq;
  private String lastError;

  /** @param dir the folder (created when first needed) */
  DeviceSpillFolder(Path dir) {
    this.dir = dir;
  }

  Path dir() {
    return dir;
  }

  /** Bytes of outputs now in files. */
  long bytes() {
    return bytes;
  }

  /** Outputs moved to files so far. */
  long spills() {
    return spills;
  }

  /** Why the last move failed, or null when it succeeded (or none failed). */
  String lastError() {
    return lastError;
  }

  /**
   * Writes the output's bytes (from {@code block}, else from {@code host}) to a new file and records
   * it on the output; false (and nothing on disk) when the write failed, the reason kept.
   */
  boolean write(DeviceMapOutputStore.Output o, OutputSpace.Block block, byte[] host) {
    long n = o.bytes();
    Path f = dir.resolve("gpu-map-" + o.key.shuffleId() + "-" + o.key.mapAttemptId() + "-" + (++fileSeq) + ".data");
    try {
      Files.createDirectories(dir);
      try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
        if (host != null) {
          writeFully(ch, ByteBuffer.wrap(host, 0, (int) n));
        } else {
          ByteBuffer chunk = ByteBuffer.allocate((int) Math.min(CHUNK, Math.max(1, n)));
          for (long at = 0; at < n; at += chunk.capacity()) {
            int len = (int) Math.min(chunk.capacity(), n - at);
            block.read(at, chunk.array(), 0, len);
            writeFully(ch, ByteBuffer.wrap(chunk.array(), 0, len));
          }
        }
      }
    } catch (IOException | UncheckedIOException e) {
      lastError = e.toString();
      deleteQuietly(f);
      return false;
    }
    o.file = f;
    lastError = null;
    bytes += n;
    spills++;
    return true;
  }

  private static void writeFully(FileChannel ch, ByteBuffer b) throws IOException {
    while (b.hasRemaining()) {
      ch.write(b);
    }
  }

  /** Copies an output's file into {@code b} in chunks. */
  static void read(DeviceMapOutputStore.Output o, OutputSpace.Block b) {
    long n = o.bytes();
    byte[] chunk = new byte[(int) Math.min(CHUNK, Math.max(1, n))];
    try (FileChannel ch = open(o)) {
      for (long at = 0; at < n; at += chunk.length) {
        int len = (int) Math.min(chunk.length, n - at);
        readFully(ch, o, at, ByteBuffer.wrap(chunk, 0, len));
        b.write(at, chunk, 0, len);
      }
    } catch (IOException e) {
      throw unreadable(o, e);
    }
  }

  /** Copies {@code out.length} bytes of an output's file from {@code at}. */
  static void readRange(DeviceMapOutputStore.Output o, long at, byte[] out) {
    try (FileChannel ch = open(o)) {
      readFully(ch, o, at, ByteBuffer.wrap(out));
    } catch (IOException e) {
      throw unreadable(o, e);
    }
  }

  /** Deletes an output's file and forgets it. */
  void drop(DeviceMapOutputStore.Output o) {
    bytes -= o.bytes();
    deleteQuietly(o.file);
    o.file = null;
  }

  /** The output's file, open for reading, after checking it holds exactly the output's bytes. */
  private static FileChannel open(DeviceMapOutputStore.Output o) throws IOException {
    FileChannel ch = FileChannel.open(o.file, StandardOpenOption.READ);
    long size = ch.size();
    if (size != o.bytes()) {
      ch.close();
      throw new IllegalStateException("device map output " + o.key.shuffleId() + "/" + o.key.mapAttemptId()
          + ": spill file " + o.file + " holds " + size + " bytes, expected " + o.bytes());
    }
    return ch;
  }

  private static void readFully(FileChannel ch, DeviceMapOutputStore.Output o, long at, ByteBuffer dst)
      throws IOException {
    int start = dst.position();
    while (dst.hasRemaining()) {
      if (ch.read(dst, at + dst.position() - start) < 0) {
        throw new IllegalStateException("device map output " + o.key.shuffleId() + "/" + o.key.mapAttemptId()
            + ": spill file " + o.file + " ended at " + (at + dst.position() - start) + " of " + o.bytes() + " bytes");
      }
    }
  }

  private static UncheckedIOException unreadable(DeviceMapOutputStore.Output o, IOException e) {
    return new UncheckedIOException("device map output " + o.key.shuffleId() + "/" + o.key.mapAttemptId()
        + ": cannot read spill file " + o.file, e);
  }

  private static void deleteQuietly(Path f) {
    try {
      Files.deleteIfExists(f);
    } catch (IOException e) {
      // the folder goes with the executor's local directories
    }
  }
}
