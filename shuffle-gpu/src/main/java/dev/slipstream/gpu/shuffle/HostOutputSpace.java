package dev.slipstream.gpu.shuffle;

import java.util.concurrent.atomic.AtomicLong;

/**
 * {@link OutputSpace} in host arrays: the store's accounting, spilling and freeing run against it
 * where there is no GPU (CPU tests). It counts what is still allocated, so tests see leaks.
 */
public final class HostOutputSpace implements OutputSpace {
  private final AtomicLong live = new AtomicLong();

  @Override
  public Block allocate(long bytes) {
    if (bytes <= 0 || bytes > Integer.MAX_VALUE - 16) {
      throw new IllegalArgumentException("host output block of " + bytes + " bytes, expected 1.." + (Integer.MAX_VALUE - 16));
    }
    live.addAndGet(bytes);
    byte[] mem = new byte[(int) bytes];
    return new Block() {
      private boolean open = true;

      @Override
      public long length() {
        return mem.length;
      }

      @Override
      public long address() {
        return 0;
      }

      @Override
      public void write(long offset, byte[] src, int off, int len) {
        check(offset, len);
        System.arraycopy(src, off, mem, (int) offset, len);
      }

      @Override
      public void read(long offset, byte[] dst, int off, int len) {
        check(offset, len);
        System.arraycopy(mem, (int) offset, dst, off, len);
      }

      private void check(long offset, int len) {
        if (!open) {
          throw new IllegalStateException("host output block is closed");
        }
        if (offset < 0 || len < 0 || offset + len > mem.length) {
          throw new IllegalArgumentException("offset " + offset + " + length " + len + " outside block (length "
              + mem.length + ")");
        }
      }

      @Override
      public synchronized void close() {
        if (open) {
          open = false;
          live.addAndGet(-mem.length);
        }
      }
    };
  }

  /** Bytes allocated and not yet closed. */
  public long live() {
    return live.get();
  }
}
