package dev.slipstream.gpu;

import java.nio.ByteBuffer;
import jcuda.Pointer;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * Copies to, from and within one GPU's memory queued on one non-blocking stream and waited for
 * once ({@link #finish}): host bytes go through a pinned staging buffer, so many small copies (the
 * prefixes of a map task's device-table blocks, or of the blocks a reduce task received) cost one
 * stream synchronization instead of one each. Copies to the host can be read after {@link #finish};
 * a batch that reads back is not used for copies to the device before {@link #reset} (those may
 * reuse the staging when it is full).
 *
 * <p>Threading: one thread at a time; a {@link Pool} hands a batch to one task and takes it back
 * when closed. Ownership: the pool's; {@link Pool#close} frees every batch's stream and pinned buffer.
 */
public final class DeviceCopyBatch implements AutoCloseable {
  private static final int INITIAL_STAGING = 1 << 20;

  private final GpuContext ctx;
  private final Pool pool;
  private final CUstream stream = new CUstream();
  private Pointer staging;
  private ByteBuffer view;
  private int capacity;
  private int used;
  private boolean pending;

  private DeviceCopyBatch(GpuContext ctx, Pool pool) {
    this.ctx = ctx;
    this.pool = pool;
    ctx.makeCurrent();
    CudaDriver.check(JCudaDriver.cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    grow(INITIAL_STAGING);
  }

  /** The batches of one GPU: at most as many as were in use at once, reused. */
  public static final class Pool implements AutoCloseable {
    private final GpuContext ctx;
    private final java.util.ArrayDeque<DeviceCopyBatch> idle = new java.util.ArrayDeque<>();
    private final java.util.List<DeviceCopyBatch> all = new java.util.ArrayList<>();
    private boolean closed;

    public Pool(GpuContext ctx) {
      this.ctx = ctx;
    }

    /** An empty batch for the caller until it closes it. */
    public synchronized DeviceCopyBatch acquire() {
      if (closed) {
        throw new IllegalStateException("device copy batches of device " + ctx.device() + " are closed");
      }
      DeviceCopyBatch b = idle.poll();
      if (b == null) {
        b = new DeviceCopyBatch(ctx, this);
        all.add(b);
      }
      b.used = 0;
      return b;
    }

    synchronized void release(DeviceCopyBatch b) {
      if (!closed) {
        idle.push(b);
      }
    }

    /** Frees every batch's stream and staging buffer (after the work that used them). */
    @Override
    public synchronized void close() {
      if (closed) {
        return;
      }
      closed = true;
      ctx.makeCurrent();
      for (DeviceCopyBatch b : all) {
        JCudaDriver.cuStreamSynchronize(b.stream);
        JCudaDriver.cuStreamDestroy(b.stream);
        JCudaDriver.cuMemFreeHost(b.staging);
      }
      all.clear();
      idle.clear();
    }
  }

  /** Waits for what is still queued and gives the batch back to its pool. */
  @Override
  public void close() {
    try {
      finish();
    } finally {
      pool.release(this);
    }
  }

  private void grow(int bytes) {
    if (staging != null) {
      JCudaDriver.cuMemFreeHost(staging);
    }
    staging = CudaDriver.allocHost(bytes, "device copy batch staging");
    view = staging.getByteBuffer(0, bytes);
    capacity = bytes;
  }

  /** Room for {@code len} more staged bytes: a full buffer is drained (its copies waited for) and, if need be, grown. */
  private int reserve(int len, boolean keepStaged) {
    if (used + len > capacity) {
      if (keepStaged) {
        throw new IllegalStateException("device copy batch: " + len + " more bytes to read back do not fit the "
            + capacity + "-byte staging buffer holding " + used + "; finish the batch first");
      }
      finish();
      used = 0;
      if (len > capacity) {
        grow(Math.max(len, capacity * 2));
      }
    }
    int at = used;
    used += len;
    return at;
  }

  /** Queues a copy of {@code src} to device address {@code dst}. */
  public void toDevice(long dst, byte[] src) {
    if (src.length == 0) {
      return;
    }
    if (dst == 0) {
      throw new IllegalArgumentException("device copy of " + src.length + " bytes to address 0");
    }
    int at = reserve(src.length, false);
    view.put(at, src, 0, src.length);
    ctx.makeCurrent();
    CudaDriver.check(JCudaDriver.cuMemcpyHtoDAsync(CudaDriver.at(dst), staging.withByteOffset(at), src.length, stream),
        "cuMemcpyHtoDAsync(" + src.length + " bytes)");
    pending = true;
  }

  /** Queues a copy of {@code len} bytes from device address {@code src} to device address {@code dst}. */
  public void withinDevice(long dst, long src, long len) {
    if (len <= 0) {
      return;
    }
    if (src == 0 || dst == 0) {
      throw new IllegalArgumentException("device copy of " + len + " bytes between " + src + " and " + dst
          + ", expected two non-zero device addresses");
    }
    ctx.makeCurrent();
    CudaDriver.check(JCudaDriver.cuMemcpyDtoDAsync(CudaDriver.at(dst), CudaDriver.at(src), len, stream),
        "cuMemcpyDtoDAsync(" + len + " bytes)");
    pending = true;
  }

  /**
   * Queues a copy of {@code len} bytes from device address {@code src} to the staging buffer and
   * returns where they will be ({@link #read} after {@link #finish}); {@link #fits} says whether they do.
   */
  public int toHost(long src, int len) {
    if (src == 0) {
      throw new IllegalArgumentException("device copy of " + len + " bytes from address 0");
    }
    int at = reserve(len, true);
    ctx.makeCurrent();
    CudaDriver.check(JCudaDriver.cuMemcpyDtoHAsync(staging.withByteOffset(at), CudaDriver.at(src), len, stream),
        "cuMemcpyDtoHAsync(" + len + " bytes)");
    pending = true;
    return at;
  }

  /** Whether {@code len} more bytes to read back fit this batch's staging buffer. */
  public boolean fits(int len) {
    return used + len <= capacity;
  }

  /** Makes room for {@code bytes} of copies to the host in an empty batch. */
  public void ensureCapacity(int bytes) {
    if (used != 0 || pending) {
      throw new IllegalStateException("device copy batch: capacity changed with copies queued");
    }
    if (bytes > capacity) {
      grow(bytes);
    }
  }

  /** Empties a finished batch: its staged bytes are no longer read. */
  public void reset() {
    if (pending) {
      throw new IllegalStateException("device copy batch: reset with copies queued");
    }
    used = 0;
  }

  /** Waits for every queued copy. */
  public void finish() {
    if (pending) {
      ctx.makeCurrent();
      CudaDriver.check(JCudaDriver.cuStreamSynchronize(stream), "cuStreamSynchronize after queued device copies");
      pending = false;
    }
  }

  /** Bytes a finished {@link #toHost} copy brought, at {@code at}. */
  public void read(int at, byte[] dst, int off, int len) {
    if (pending) {
      throw new IllegalStateException("device copy batch: read before finish()");
    }
    view.get(at, dst, off, len);
  }
}
