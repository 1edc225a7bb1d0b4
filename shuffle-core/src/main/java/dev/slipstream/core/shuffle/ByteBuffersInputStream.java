package dev.slipstream.core.shuffle;

import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * An InputStream over a list of buffers, read in order; runs {@code onClose} once when closed.
 *
 * <p>Threading: not thread-safe.
 */
public final class ByteBuffersInputStream extends InputStream {
  private final List<ByteBuffer> parts;
  private final Runnable onClose;
  private int index;
  private boolean closed;

  public ByteBuffersInputStream(List<ByteBuffer> parts, Runnable onClose) {
    this.parts = parts;
    this.onClose = onClose;
  }

  private ByteBuffer current() {
    while (index < parts.size() && !parts.get(index).hasRemaining()) {
      index++;
    }
    return index < parts.size() ? parts.get(index) : null;
  }

  @Override
  public int read() {
    ByteBuffer b = current();
    return b == null ? -1 : b.get() & 0xff;
  }

  @Override
  public int read(byte[] dst, int off, int len) {
    if (len == 0) {
      return 0;
    }
    ByteBuffer b = current();
    if (b == null) {
      return -1;
    }
    int n = Math.min(len, b.remaining());
    b.get(dst, off, n);
    return n;
  }

  @Override
  public long skip(long n) {
    long skipped = 0;
    while (skipped < n) {
      ByteBuffer b = current();
      if (b == null) {
        break;
      }
      int k = (int) Math.min(n - skipped, b.remaining());
      b.position(b.position() + k);
      skipped += k;
    }
    return skipped;
  }

  @Override
  public int available() {
    ByteBuffer b = current();
    return b == null ? 0 : b.remaining();
  }

  @Override
  public void close() {
    if (!closed) {
      closed = true;
      onClose.run();
    }
  }
}
