package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.memory.RangeAllocator;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuRegion;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@link OutputSpace} of registered device memory the push kernel can send from: slabs of
 * {@code slabBytes} (one {@link GpuRegion} each: cudaMalloc'd, registered on the GPU context, and
 * with a NIC registered on it too, once per slab), carved into 256-byte aligned blocks by a
 * first-fit allocator ({@link RangeAllocator}). A block larger than a slab gets a slab of its own.
 * A slab whose last block is freed is freed too, except the newest, kept for the next map task.
 * So a map task's output costs no device allocation and no registration while a slab has room,
 * and a push names a block as (its slab's region, the block's {@link SlabBlock#base}).
 *
 * <p>Device memory in use is the slabs' size: up to a slab more than the blocks in use per slab
 * in flight (the store's budget counts blocks). Region ids are taken from {@code firstId} upwards.
 * Threading: thread-safe. Ownership: {@link #close} frees every slab; blocks must be closed first.
 */
public final class GpuOutputSpace implements OutputSpace {
  /** The default slab: 256 MiB. */
  public static final long SLAB_BYTES = 256L << 20;
  private static final long UNIT = 256;

  private final GpuContext ctx;
  private final AtomicInteger nextId;
  private final NicRegistrar nic;
  private final long slabBytes;
  private final List<Slab> slabs = new ArrayList<>();
  private boolean closed;

  public GpuOutputSpace(GpuContext ctx, int firstId) {
    this(ctx, firstId, null);
  }

  /** {@code nic}: where every slab is registered too (null: none). */
  public GpuOutputSpace(GpuContext ctx, int firstId, NicRegistrar nic) {
    this(ctx, firstId, nic, SLAB_BYTES);
  }

  public GpuOutputSpace(GpuContext ctx, int firstId, NicRegistrar nic, long slabBytes) {
    if (slabBytes < UNIT) {
      throw new IllegalArgumentException("map-output slabs of " + slabBytes + " bytes, expected at least " + UNIT);
    }
    this.ctx = ctx;
    this.nextId = new AtomicInteger(firstId);
    this.nic = nic;
    this.slabBytes = slabBytes;
  }

  /** One slab: its region, its free ranges, its NIC memory key, and the blocks in it. */
  private final class Slab {
    final GpuRegion region;
    final RangeAllocator ranges;
    final int mkey;
    int blocks;

    Slab(GpuRegion region, int mkey) {
      this.region = region;
      this.ranges = new RangeAllocator(region.length(), UNIT);
      this.mkey = mkey;
    }

    void free() {
      try {
        if (nic != null) {
          nic.deregister(region.id(), mkey);
        }
      } finally {
        region.close();
      }
    }
  }

  @Override
  public synchronized SlabBlock allocate(long bytes) {
    if (closed) {
      throw new IllegalStateException("GPU map-output space is closed");
    }
    if (bytes <= 0) {
      throw new IllegalArgumentException("a map-output block of " + bytes + " bytes, expected > 0");
    }
    for (int i = slabs.size() - 1; i >= 0; i--) {
      Slab s = slabs.get(i);
      long at = s.ranges.take(bytes);
      if (at >= 0) {
        s.blocks++;
        return new SlabBlock(this, s, at, bytes, s.ranges.rounded(bytes));
      }
    }
    Slab s = newSlab(Math.max(slabBytes, (bytes + UNIT - 1) / UNIT * UNIT));
    long at = s.ranges.take(bytes);
    s.blocks++;
    return new SlabBlock(this, s, at, bytes, s.ranges.rounded(bytes));
  }

  private Slab newSlab(long bytes) {
    GpuRegion r = GpuRegion.create(ctx, MemoryKind.DEVICE, bytes, nextId.getAndIncrement());
    int mkey = 0;
    if (nic != null) {
      try {
        mkey = nic.register(r.devicePointer(), r.length(), r.id());
      } catch (RuntimeException e) {
        r.close();
        throw e;
      }
    }
    Slab s = new Slab(r, mkey);
    slabs.add(s);
    return s;
  }

  /** Gives a block's range back; its slab goes when it was the last block and not the newest slab. */
  private void free(Slab s, long at, long rounded) {
    Slab drop = null;
    synchronized (this) {
      s.ranges.give(at, rounded);
      if (--s.blocks == 0 && (closed || s != slabs.get(slabs.size() - 1))) {
        slabs.remove(s);
        drop = s;
      }
    }
    if (drop != null) {
      drop.free();
    }
  }

  /** Slabs of device memory now (their bytes: {@link #slabBytesInUse}). */
  public synchronized int slabs() {
    return slabs.size();
  }

  public synchronized long slabBytesInUse() {
    return slabs.stream().mapToLong(x -> x.region.length()).sum();
  }

  /** Frees the slabs no block is in; those with blocks go when their last block is closed. */
  @Override
  public void close() {
    List<Slab> drop = new ArrayList<>();
    synchronized (this) {
      closed = true;
      slabs.removeIf(s -> {
        if (s.blocks == 0) {
          drop.add(s);
          return true;
        }
        return false;
      });
    }
    drop.forEach(Slab::free);
  }

  /**
   * A block: {@code length} bytes at {@code base} of its slab's {@link #region} (the push kernel's
   * source region; offsets within the block are relative to {@code base}).
   */
  public static final class SlabBlock implements Block {
    private final GpuOutputSpace space;
    private final Slab slab;
    private final long base;
    private final long length;
    private final long rounded;
    private boolean open = true;

    private SlabBlock(GpuOutputSpace space, Slab slab, long base, long length, long rounded) {
      this.space = space;
      this.slab = slab;
      this.base = base;
      this.length = length;
      this.rounded = rounded;
    }

    /** The registered region the block lies in. */
    public GpuRegion region() {
      return slab.region;
    }

    /** The memory key of {@link #region} on the space's NIC (0 when the space registers on none). */
    public int nicKey() {
      return slab.mkey;
    }

    /** The block's offset in {@link #region}. */
    public long base() {
      return base;
    }

    @Override
    public long length() {
      return length;
    }

    @Override
    public long address() {
      return slab.region.devicePointer() + base;
    }

    @Override
    public void write(long offset, byte[] src, int off, int len) {
      check(offset, len);
      slab.region.write(base + offset, off == 0 && len == src.length ? src : java.util.Arrays.copyOfRange(src, off,
          off + len));
    }

    @Override
    public void read(long offset, byte[] dst, int off, int len) {
      check(offset, len);
      slab.region.read(base + offset, dst, off, len);
    }

    @Override
    public void read(long offset, java.nio.ByteBuffer dst) {
      check(offset, dst.remaining());
      slab.region.read(base + offset, dst); // straight into a direct buffer: no staging copy
    }

    private void check(long offset, long len) {
      if (offset < 0 || len < 0 || offset > length - len) {
        throw new IndexOutOfBoundsException("map-output block: offset " + offset + " + length " + len
            + " outside its " + length + " bytes");
      }
    }

    @Override
    public void close() {
      synchronized (this) {
        if (!open) {
          return;
        }
        open = false;
      }
      space.free(slab, base, rounded);
    }
  }
}
