package dev.slipstream.gpu.shuffle;

/**
 * Where the device map-output store keeps blocks: registered memory that a holder can push from.
 * {@link GpuOutputSpace} allocates registered device regions; tests of the store's accounting and
 * spilling use {@link HostOutputSpace}, which holds the same bytes in host memory.
 *
 * <p>Threading: any thread. Ownership: the caller closes each {@link Block}.
 */
public interface OutputSpace {
  /** A fresh block of {@code bytes} (> 0) bytes, 16-byte aligned. */
  Block allocate(long bytes);

  /** Frees what the space holds beyond its blocks (the store calls it when it closes, after its blocks). */
  default void close() {}

  /** One allocation. */
  interface Block extends AutoCloseable {
    long length();

    /** Device address of the block's first byte (0 for host space). */
    long address();

    void write(long offset, byte[] src, int off, int len);

    void read(long offset, byte[] dst, int off, int len);

    /** Fills {@code dst}'s remaining bytes from {@code offset}; its position is left as it is. */
    default void read(long offset, java.nio.ByteBuffer dst) {
      byte[] b = new byte[dst.remaining()];
      read(offset, b, 0, b.length);
      dst.duplicate().put(b);
    }

    @Override
    void close();
  }
}
