package dev.slipstream.gpu.serve;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * A request ring between one reader and one holder, in a shared-memory file: one process makes
 * the file (mode 0600, so only processes of the same user can map it) and formats it
 * ({@link #create}), the other maps it ({@link #open}); the holder maps it into its GPU too
 * ({@code dev.slipstream.gpu.ResidentServer#attachReader}). Only the reader posts into it.
 *
 * <p>Threading: the ring is thread-safe ({@link ServeRing}). Ownership: the maker owns the file;
 * its {@link #close()} deletes it (a mapping goes with its buffer).
 */
public final class ServeRingFile implements AutoCloseable {
  private final Path path;
  private final ServeRing ring;
  /** Whether this process made the file (and deletes it on close). */
  private final boolean made;

  private ServeRingFile(Path path, ServeRing ring, boolean made) {
    this.path = path;
    this.ring = ring;
    this.made = made;
  }

  /** Makes {@code path} (it must not exist) as a ring of {@code slots} slots, formatted with this process's id. */
  public static ServeRingFile create(Path path, int slots) throws IOException {
    ServeRing.checkSlots(slots);
    long bytes = ServeRing.bytes(slots);
    FileChannel ch = FileChannel.open(path, java.util.Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
        StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    try (ch) {
      ch.write(java.nio.ByteBuffer.allocate(1), bytes - 1); // the file's full size, so every page maps
      MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_WRITE, 0, bytes);
      return new ServeRingFile(path, ServeRing.format(m, slots, ProcessHandle.current().pid()), true);
    } catch (IOException | RuntimeException e) {
      Files.deleteIfExists(path); // made above: CREATE_NEW failed otherwise
      throw e;
    }
  }

  /**
   * Maps the ring file another process made at {@code path} for this process to post into
   * ({@link ServeRing#open} checks it). {@link #close()} then leaves the file to its maker.
   */
  public static ServeRingFile open(Path path) throws IOException {
    try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      long bytes = ch.size();
      if (bytes > ServeRing.bytes(ServeRing.MAX_SLOTS)) {
        throw new IllegalArgumentException("request ring " + path + " has " + bytes + " bytes, expected at most "
            + ServeRing.bytes(ServeRing.MAX_SLOTS));
      }
      MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_WRITE, 0, bytes);
      return new ServeRingFile(path, ServeRing.open(m), false);
    }
  }

  public Path path() {
    return path;
  }

  public ServeRing ring() {
    return ring;
  }

  @Override
  public void close() throws IOException {
    if (made) {
      Files.deleteIfExists(path);
    }
  }
}
