package dev.slipstream.gpu;

import java.util.List;

/**
 * Device queues of one backend over a fixed region table ({@code slip_queueset}): what a push
 * kernel is given. Kernels address memory as (table index, offset); the table holds the local
 * regions first, then the remote ones, in the order given to {@link #create}.
 *
 * <p>Ownership: close it before the regions it uses; {@link #close()} is idempotent (a proxy queue
 * set joins its executor thread there). Threading: a proxy set's executor is the only thread that
 * issues CUDA calls for it while its kernels run; other threads should poll, not block, meanwhile.
 */
public final class QueueSet implements AutoCloseable {
  private final Backend backend;
  private final int size;
  private final int tableSize;
  private long handle;

  private QueueSet(Backend backend, int size, int tableSize, long handle) {
    this.backend = backend;
    this.size = size;
    this.tableSize = tableSize;
    this.handle = handle;
  }

  /**
   * Builds {@code nqueues} queues of {@code backend}. {@code depth}: proxy ring slots (a power of
   * two), ignored for nvlink.
   */
  public static QueueSet create(GpuContext ctx, Backend backend, int nqueues, int depth, List<GpuRegion> locals,
      List<RemoteRegion> remotes) {
    long[] l = handles(locals);
    long[] r = new long[remotes.size()];
    for (int i = 0; i < r.length; i++) {
      r[i] = remotes.get(i).handle();
    }
    return new QueueSet(backend, nqueues, l.length + r.length,
        SlipNative.createQueueSet(ctx.handle(), backend, nqueues, depth, l, r));
  }

  /**
   * A gpunetio set over queue pairs {@code [first, first + count)} of a connected NIC link
   * ({@code link}: its native handle): {@code locals} must be registered on the link's NIC (their
   * table keys are their memory keys there), then the peer's regions.
   */
  static QueueSet onLink(GpuContext ctx, long link, int first, int count, List<GpuRegion> locals,
      List<dev.slipstream.gpu.nic.NicLanding> peer) {
    long[] l = handles(locals);
    long[] p = new long[peer.size() * 3];
    for (int i = 0; i < peer.size(); i++) {
      p[3 * i] = peer.get(i).regionId();
      p[3 * i + 1] = Integer.toUnsignedLong(peer.get(i).mkey());
      p[3 * i + 2] = peer.get(i).length();
    }
    return new QueueSet(Backend.GPUNETIO, count, l.length + peer.size(),
        SlipNative.createLinkQueueSet(ctx.handle(), link, first, count, l, p));
  }

  public Backend backend() {
    return backend;
  }

  public int size() {
    return size;
  }

  /** Number of region table entries (locals, then remotes). */
  public int tableSize() {
    return tableSize;
  }

  /** Device address of the {@code slip_dev_queue} array, the push kernel's first argument. */
  public long devicePointer() {
    return SlipNative.queueSetDevicePointer(handle());
  }

  /**
   * Throws the first error completion a kernel or the proxy executor reported, with its text
   * ("offset 4096 + length 512 outside region 7 (length 4096)"); {@code clear} resets the record.
   */
  public void check(boolean clear) {
    SlipNative.checkQueueSet(handle(), clear);
  }

  /**
   * Replaces local table entries {@code [first, first + regions.size())} (nvlink sets only), so one
   * set serves pushes from changing sources. Only while no kernel uses the set.
   */
  public void setLocals(int first, List<GpuRegion> regions) {
    SlipNative.setQueueSetLocals(handle(), first, handles(regions));
  }

  private static long[] handles(List<GpuRegion> regions) {
    long[] h = new long[regions.size()];
    for (int i = 0; i < h.length; i++) {
      h[i] = regions.get(i).handle();
    }
    return h;
  }

  /** Bytes of one device table entry ({@code slip_dev_region}; {@code AbiLayoutTest} checks it). */
  public static final int DEV_REGION_BYTES = 32;

  /** Local entries staged by {@link #stageLocals}: their device image and where it goes. */
  public record StagedLocals(long deviceAddress, byte[] image) {}

  /**
   * As {@link #setLocals}, but without the copy: updates the host table and returns the entries'
   * device image and address, for the caller to copy on the stream of the push that uses them
   * (ordered before it, with no synchronisation). Only while no kernel on another stream uses the set.
   */
  public StagedLocals stageLocals(int first, List<GpuRegion> regions) {
    byte[] image = new byte[regions.size() * DEV_REGION_BYTES];
    return new StagedLocals(SlipNative.stageQueueSetLocals(handle(), first, handles(regions), image), image);
  }

  long handle() {
    if (handle == 0) {
      throw new IllegalStateException(backend + " queue set is closed");
    }
    return handle;
  }

  @Override
  public void close() {
    if (handle != 0) {
      SlipNative.destroyQueueSet(handle);
      handle = 0;
    }
  }
}
