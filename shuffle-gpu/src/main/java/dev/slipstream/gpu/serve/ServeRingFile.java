package dev.slipstream.gpu.serve;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * A reader's request ring towards one holder, in a shared-memory file: the reader makes the file
 * (mode 0600, so only processes of the same user can map it), maps it and formats it; the holder
 * maps the same file into its GPU ({@code dev.slipstream.gpu.ResidentServer#attachReader}).
 *
 * <p>Threading: the ring is thread-safe ({@link ServeRing}). Ownership: owns the file;
 * {@link #close()} deletes it (the mapping goes with the buffer).
 */
public final class ServeRingFile implements AutoCloseable {
  private final Path path;
  private final ServeRing ring;

  private ServeRingFile(Path path, ServeRing ring) {
    this.path = path;
    this.ring = ring;
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
      return new ServeRingFile(path, ServeRing.format(m, slots, ProcessHandle.current().pid()));
    } catch (IOException | RuntimeException e) {
      Files.deleteIfExists(path); // made above: CREATE_NEW failed otherwise
      throw e;
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
    Files.deleteIfExists(path);
  }
}
