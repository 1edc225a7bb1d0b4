package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.ChecksumAlgorithm;
import dev.slipstream.core.shuffle.ServedOutput;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.zip.Checksum;

/**
 * The GPU shuffle's staging path ({@link GpuPath#STAGED}): GPU map outputs served to reduce
 * tasks that have no direct device path to their holder (another machine without GPUNetIO, or
 * {@code spark.slipstream.gpu.path=staged}) through the host path's pull-driven writes. The holder's
 * block server copies the requested blocks from its device map-output store into host memory and
 * writes them one-sided into the reader's registered host landing region; the reader copies each
 * one into device memory.
 *
 * <p>A block's <em>served form</em> is its packed bytes followed by a {@value #TRAILER}-byte
 * trailer: the block's rows and {@link #MAGIC}, each 8-byte little-endian (the rows cannot be told
 * from the bytes: packed columns are padded to 16 bytes). The reader asks for
 * {@link #servedLength} of the map status's size and checks the trailer against the bytes that came
 * and the column widths it expects ({@link #land}).
 */
public final class StagedBlocks {
  /** Bytes after a block's packed bytes in its served form: rows, then {@link #MAGIC}. */
  public static final int TRAILER = 16;
  /** The served form's trailer magic: "SLSTAGE1" read as a little-endian long. */
  static final long MAGIC = 0x3145474154534c53L;
  /** Largest host copy of device bytes made at once, and the reader's pieces. */
  static final int PIECE = 4 << 20;

  private StagedBlocks() {}

  /** Bytes of the served form of a block of {@code bytes} packed bytes: an empty block stays empty. */
  public static long servedLength(long bytes) {
    if (bytes < 0) {
      throw new IllegalArgumentException("block of " + bytes + " bytes, expected >= 0");
    }
    return bytes == 0 ? 0 : bytes + TRAILER;
  }

  /**
   * The outputs of {@code store} for a block server ({@code ShuffleNode.serveAlso}): each retained
   * output is pinned on the device until released; blocks are copied to host memory as the server
   * asks for their bytes, and their checksums ({@code checksum}) are computed over the served form.
   * An output the store does not have is null; one the store cannot pin (its budgets) throws with the reason.
   */
  public static ServedOutput.Source source(DeviceMapOutputStore store, ChecksumAlgorithm checksum) {
    return source(store, checksum, new Staging());
  }

  static ServedOutput.Source source(DeviceMapOutputStore store, ChecksumAlgorithm checksum, Staging staging) {
    return (shuffleId, mapId) -> store.contains(shuffleId, mapId)
        ? new Served(store.pin(shuffleId, mapId), checksum, staging) : null;
  }

  /**
   * Direct buffers of {@value #PIECE} bytes that device blocks are copied into for the transport
   * (direct: the copy lands there without staging, and the transport sends them without copying
   * them again), reused: up to {@link #KEPT} idle ones are kept, so a steady stream of requests
   * allocates none (direct memory allocated per request makes the JDK call System.gc()).
   */
  static final class Staging {
    static final int KEPT = 16;
    private final java.util.ArrayDeque<ByteBuffer> idle = new java.util.ArrayDeque<>();

    synchronized ByteBuffer take() {
      ByteBuffer b = idle.pollFirst();
      return b != null ? b.clear() : ByteBuffer.allocateDirect(PIECE);
    }

    synchronized void give(ByteBuffer b) {
      if (idle.size() < KEPT) {
        idle.addFirst(b);
      }
    }

    synchronized int idle() {
      return idle.size();
    }
  }

  /** Where a landed block's packed bytes go, from offset 0 in order (device memory on a GPU). */
  @FunctionalInterface
  public interface Sink {
    void write(long offset, byte[] src, int off, int len);
  }

  /**
   * Reads one block of {@code servedBytes} bytes in its served form from {@code in}: the packed
   * bytes into {@code sink}, then the trailer. Returns the block's rows once the trailer is checked:
   * its magic, and that that many rows of {@code widths} pack into exactly the bytes that came.
   *
   * @param what names the block in errors
   * @throws IOException naming what was got and what was expected (a short stream, a damaged trailer)
   */
  public static long land(InputStream in, long servedBytes, int[] widths, Sink sink, String what) throws IOException {
    long data = dataBytes(servedBytes, what);
    byte[] piece = new byte[(int) Math.min(PIECE, Math.max(TRAILER, data))];
    for (long at = 0; at < data; ) {
      int n = (int) Math.min(piece.length, data - at);
      readFully(in, piece, n, what, at, servedBytes);
      sink.write(at, piece, 0, n);
      at += n;
    }
    readFully(in, piece, TRAILER, what, data, servedBytes);
    return checkTrailer(ByteBuffer.wrap(piece, 0, TRAILER), data, widths, what);
  }

  /** Where a landed block's packed bytes go from a view of the landing region (device memory on a GPU). */
  @FunctionalInterface
  public interface ViewSink {
    /** Takes {@code src}'s remaining bytes, from offset 0 of the block; leaves its position. */
    void write(long offset, ByteBuffer src);
  }

  /**
   * As {@link #land}, from {@code view}: one block in its served form, whole, as it landed (a view
   * of the host landing region); the packed bytes go to {@code sink} in one piece.
   */
  public static long land(ByteBuffer view, int[] widths, ViewSink sink, String what) throws IOException {
    int data = (int) dataBytes(view.remaining(), what);
    int at = view.position();
    long rows = checkTrailer(view.slice(at + data, TRAILER), data, widths, what);
    sink.write(0, view.slice(at, data));
    return rows;
  }

  private static long dataBytes(long servedBytes, String what) throws IOException {
    if (servedBytes < TRAILER) {
      throw new IOException(what + ": " + servedBytes + " bytes served, expected at least the " + TRAILER
          + "-byte trailer");
    }
    return servedBytes - TRAILER;
  }

  /** The rows in trailer {@code t}, checked: its magic, and that they pack into {@code data} bytes of {@code widths}. */
  private static long checkTrailer(ByteBuffer t, long data, int[] widths, String what) throws IOException {
    t = t.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    long rows = t.getLong(t.position());
    long magic = t.getLong(t.position() + 8);
    if (magic != MAGIC) {
      throw new IOException(what + ": trailer magic 0x" + Long.toHexString(magic) + ", expected 0x"
          + Long.toHexString(MAGIC) + " (not a GPU block in its served form)");
    }
    // The largest row count whose key column alone fits the bytes bounds what can be packed.
    if (rows < 0 || rows > data / 8 || BatchLayout.packedBytes(rows, widths) != data) {
      throw new IOException(what + ": trailer says " + rows + " rows, which pack into "
          + (rows < 0 || rows > data / 8 ? "a different size" : BatchLayout.packedBytes(rows, widths) + " bytes")
          + " with column widths " + java.util.Arrays.toString(widths) + ", but " + data + " bytes came");
    }
    return rows;
  }

  private static void readFully(InputStream in, byte[] dst, int len, String what, long at, long servedBytes)
      throws IOException {
    for (int done = 0; done < len; ) {
      int n = in.read(dst, done, len - done);
      if (n < 0) {
        throw new EOFException(what + ": the stream ended after " + (at + done) + " of " + servedBytes + " bytes");
      }
      done += n;
    }
  }

  /**
   * One retained output: pinned on the device until released. Read by one server thread at a time;
   * its staging buffers go back when it is released (the writes that read them have completed). A
   * block's checksum is computed once and kept with the output in the store, since every chunk of a
   * block streamed in pieces carries it.
   */
  private static final class Served implements ServedOutput {
    private final DeviceMapOutputStore.Pinned pinned;
    private final ChecksumAlgorithm algorithm;
    private final Staging staging;
    private final List<ByteBuffer> held = new ArrayList<>();
    private final AtomicBoolean released = new AtomicBoolean();

    Served(DeviceMapOutputStore.Pinned pinned, ChecksumAlgorithm algorithm, Staging staging) {
      this.pinned = pinned;
      this.algorithm = algorithm;
      this.staging = staging;
    }

    @Override
    public int numPartitions() {
      return pinned.partitions();
    }

    @Override
    public long partitionLength(int partition) {
      checkPartition(partition);
      return servedLength(pinned.bytes(partition));
    }

    @Override
    public long checksum(int partition) {
      checkPartition(partition);
      if (algorithm == ChecksumAlgorithm.NONE) {
        return 0;
      }
      Long known = pinned.checksum(partition);
      if (known != null) {
        return known;
      }
      Checksum c = algorithm.newChecksum();
      long length = partitionLength(partition);
      for (long at = 0; at < length; ) {
        long n = Math.min(PIECE, length - at);
        List<ByteBuffer> pieces = new ArrayList<>(2);
        try {
          stage(partition, at, n, pieces, false);
          pieces.forEach(c::update);
        } finally {
          pieces.stream().filter(ByteBuffer::isDirect).forEach(staging::give);
        }
        at += n;
      }
      pinned.rememberChecksum(partition, c.getValue());
      return c.getValue();
    }

    @Override
    public List<ByteBuffer> slices(int partition, long offset, long length) {
      long blockLength = partitionLength(partition);
      if (offset < 0 || length < 0 || offset > blockLength || length > blockLength - offset) {
        throw new IndexOutOfBoundsException("range offset " + offset + " + length " + length + " outside the served"
            + " GPU block of partition " + partition + " (length " + blockLength + ")");
      }
      List<ByteBuffer> out = new ArrayList<>();
      stage(partition, offset, length, out, true);
      if (offset == 0 && length == blockLength && algorithm != ChecksumAlgorithm.NONE
          && pinned.checksum(partition) == null) {
        // The whole block is in host memory now: its checksum costs no second copy.
        Checksum c = algorithm.newChecksum();
        out.forEach(b -> c.update(b.duplicate()));
        pinned.rememberChecksum(partition, c.getValue());
      }
      return out;
    }

    /**
     * Copies {@code [offset, offset + length)} of the served block into staging buffers (the trailer
     * from host memory) and adds them to {@code out}; with {@code hold} the direct ones go back at the
     * release, else the caller gives them back.
     */
    private void stage(int partition, long offset, long length, List<ByteBuffer> out, boolean hold) {
      if (released.get()) {
        throw new IllegalStateException("GPU map output read after its release");
      }
      long data = pinned.bytes(partition);
      long end = offset + length;
      for (long at = offset; at < Math.min(end, data); ) {
        int n = (int) Math.min(PIECE, Math.min(end, data) - at);
        ByteBuffer b = staging.take().limit(n);
        if (hold) {
          synchronized (held) {
            held.add(b);
          }
        }
        out.add(b);
        pinned.block().read(pinned.offset(partition) + at, b);
        at += n;
      }
      if (end > data) {
        ByteBuffer t = ByteBuffer.allocate(TRAILER).order(ByteOrder.LITTLE_ENDIAN);
        t.putLong(0, pinned.rows(partition)).putLong(8, MAGIC);
        long from = Math.max(offset, data) - data;
        out.add(t.position((int) from).limit((int) (end - data)).slice());
      }
    }

    private void checkPartition(int partition) {
      if (partition < 0 || partition >= pinned.partitions()) {
        throw new IndexOutOfBoundsException("partition " + partition + " outside [0, " + pinned.partitions()
            + ") of a GPU map output");
      }
    }

    @Override
    public void release() {
      if (released.compareAndSet(false, true)) {
        synchronized (held) {
          held.forEach(staging::give);
          held.clear();
        }
        pinned.close();
      }
    }
  }
}
