package dev.slipstream.gpu;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A holder GPU's resident server (native/include/slipstream/serve.h): a bounded kernel that takes
 * write requests from the readers' request rings, checks them on the device against the reader
 * entries and a device-resident directory of map outputs, pushes the blocks into the readers'
 * landing regions and answers in the rings. The host only sets up: reader entries (a reader's
 * ring file, made by the reader, is mapped and registered here), directory entries, and a wake
 * thread that launches the kernel again when a request arrives after it parked.
 *
 * <p>Parking: the kernel's CTAs leave after {@code idle} without a request, so an idle executor
 * holds no SM; the wake thread then looks at the rings' host memory every {@code wakePoll} and
 * launches the kernel when one holds a request it has not taken.
 *
 * <p>Threading: thread-safe (the native server serialises its calls). Ownership: owns the native
 * server and the ring mappings; {@link #close()} stops the kernel, then unmaps the rings. The
 * caller keeps the landing regions and map outputs mapped until {@link #detachReader} or
 * {@link #revokeOutput} returned (or until close).
 */
public final class ResidentServer implements AutoCloseable {
  /** The server's shape: its readers, directory slots (a power of two), CTAs x threads, idle and wake times. */
  public record Settings(int readers, int directorySlots, int ctas, int threads, Duration idle, Duration wakePoll) {
    public Settings {
      if (readers < 1 || directorySlots < 2 || Integer.bitCount(directorySlots) != 1 || ctas < 1 || threads < 32
          || threads % 32 != 0 || idle.isNegative() || wakePoll.isNegative() || wakePoll.isZero()) {
        throw new IllegalArgumentException("resident server of " + readers + " readers, " + directorySlots
            + " directory slots, " + ctas + " x " + threads + " threads, idle " + idle + ", wake poll " + wakePoll
            + ": expected at least 1 reader, a power of two of at least 2 slots, at least 1 CTA, a multiple of 32"
            + " threads, and positive times");
      }
    }
  }

  /** What the kernel did since the server was made. */
  public record Stats(long served, long failed, long bytes, int ctasResident) {}

  private final GpuContext ctx;
  private final Settings settings;
  private final long[] rings;
  /** Per reader entry: what undoes its ring's NIC registration (remote readers), else null. */
  private final Runnable[] releases;
  private final Thread waker;
  private long handle;
  private volatile boolean closed;
  private volatile RuntimeException wakeFailure;

  private ResidentServer(GpuContext ctx, Settings settings, long handle) {
    this.ctx = ctx;
    this.settings = settings;
    this.handle = handle;
    this.rings = new long[settings.readers()];
    this.releases = new Runnable[settings.readers()];
    this.waker = new Thread(this::wakeLoop, "slipstream-serve-wake-" + ctx.device());
    this.waker.setDaemon(true);
  }

  /** Makes the server on {@code ctx}'s GPU; the kernel runs from the first {@link #start} on. */
  public static ResidentServer create(GpuContext ctx, Settings settings) {
    long h = SlipNative.createServer(ctx.handle(), settings.readers(), settings.directorySlots(), settings.ctas(),
        settings.threads(), settings.idle().toNanos());
    ResidentServer s = new ResidentServer(ctx, settings, h);
    s.waker.start();
    return s;
  }

  public Settings settings() {
    return settings;
  }

  /**
   * Reader entry {@code index}: maps the reader's ring file (its header and size checked), and
   * serves requests from it into {@code landingLength} bytes at device address {@code landing},
   * for requests naming {@code landingKey}. An entry already set is replaced (its ring unmapped
   * once the kernel left it).
   */
  public synchronized void attachReader(int index, Path ringFile, long landing, long landingLength, long landingKey) {
    attach(index, ringFile, ring -> SlipNative.setServerReader(handle(), index, ring, landing, landingLength,
        landingKey));
  }

  /** WQEs per queue pair of a reader's set: a request is at most 32 (30 blocks, the table, the signal). */
  private static final int NIC_QUEUE_DEPTH = 1024;
  /** The region table of a set from {@link #nicQueues}: the staging region, then the reader's landing region. */
  private static final int NIC_STAGING_INDEX = 0;
  private static final int NIC_LANDING_INDEX = 1;

  /**
   * A one-queue gpunetio set for one reader entry ({@link #attachReaderNic}): {@code staging} (this
   * process's block-table staging region, at least {@link #stagingBytes}) and the reader's landing
   * region. The caller closes it after the entry is detached.
   */
  public static QueueSet nicQueues(GpuContext ctx, GpuRegion staging, RemoteRegion landing) {
    return QueueSet.create(ctx, Backend.GPUNETIO, 1, NIC_QUEUE_DEPTH, List.of(staging), List.of(landing));
  }

  /**
   * As {@link #attachReader}, for a reader pushed to over gpunetio: the kernel posts RDMA writes of
   * the blocks, the block table and the signal's fetch-add on the queue of {@code set} (made by
   * {@link #nicQueues}; only this server posts on it while the entry is set, and it outlives the
   * entry), into {@code landingLength} bytes of the reader's landing region.
   */
  public synchronized void attachReaderNic(int index, Path ringFile, QueueSet set, long landingLength,
      long landingKey) {
    if (set.backend() != Backend.GPUNETIO || set.size() != 1 || set.tableSize() != 2) {
      throw new IllegalArgumentException("gpunetio reader entry " + index + ": a " + set.backend() + " set of "
          + set.size() + " queues and " + set.tableSize() + " regions, expected one made by nicQueues (1 gpunetio"
          + " queue, 2 regions)");
    }
    long queueAddress = set.devicePointer();
    attach(index, ringFile, ring -> SlipNative.setServerReaderNic(handle(), index, ring, queueAddress,
        NIC_LANDING_INDEX, NIC_STAGING_INDEX, landingLength, landingKey));
  }

  /**
   * As {@link #attachReaderNic}, for a reader on another machine: {@code ringFile} (made by this
   * process) is this side's copy of the ring, registered on {@code nic} as region {@code ringId} so
   * that the reader writes its requests into it; the kernel also answers into the reader's copy,
   * region ({@code mirrorId}, {@code mirrorKey}) on the reader's NIC ({@link RemoteRing}), on the
   * queue pair of {@code set} (made over the link to that reader: {@link dev.slipstream.gpu.nic.NicDevice.Link#queueSet},
   * table: the staging region, then the reader's landing region). Returns the ring's memory key,
   * which the reader needs to {@link RemoteRing#connect}; {@link #detachReader} deregisters it.
   */
  public synchronized int attachReaderRemote(int index, Path ringFile, NativeNic nic, int ringId, QueueSet set,
      long landingLength, long landingKey, int mirrorId, int mirrorKey) {
    if (set.backend() != Backend.GPUNETIO || set.size() != 1 || set.tableSize() != 2) {
      throw new IllegalArgumentException("remote reader entry " + index + ": a " + set.backend() + " set of "
          + set.size() + " queues and " + set.tableSize() + " regions, expected 1 gpunetio queue over the reader's"
          + " link and 2 regions (staging, landing)");
    }
    long queueAddress = set.devicePointer();
    int[] key = new int[1];
    attach(index, ringFile, ring -> {
      long bytes;
      try {
        bytes = java.nio.file.Files.size(ringFile); // the native attach checked it against the header
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException("remote reader entry " + index + ": ring " + ringFile, e);
      }
      key[0] = nic.registerFile(SlipNative.ringHostPointer(ring), bytes, ringId, ringFile);
      try {
        SlipNative.setServerReaderRemote(handle(), index, ring, queueAddress, NIC_LANDING_INDEX, NIC_STAGING_INDEX,
            landingLength, landingKey, ringId, key[0], mirrorId, mirrorKey);
      } catch (RuntimeException e) {
        nic.deregister(ringId, key[0]);
        throw e;
      }
    });
    int k = key[0];
    releases[index] = () -> nic.deregister(ringId, k);
    return k;
  }

  /** Bytes of staging region a gpunetio reader's entry needs: one block-table slot per CTA. */
  public long stagingBytes() {
    return (long) settings.ctas() * STAGING_SLOT_BYTES;
  }

  /** One CTA's block-table staging slot ({@code SLIP_SERVE_STAGING_BYTES}). */
  public static final int STAGING_SLOT_BYTES = 512;

  private void attach(int index, Path ringFile, java.util.function.LongConsumer set) {
    checkIndex(index);
    long ring = SlipNative.attachRing(ctx.handle(), ringFile.toString());
    try {
      if (rings[index] != 0) {
        detachReader(index);
      }
      set.accept(ring);
      SlipNative.ackRing(ring); // the reader may post from now on
    } catch (RuntimeException e) {
      SlipNative.detachRing(ring);
      throw e;
    }
    rings[index] = ring;
  }

  /**
   * Takes no more requests from reader {@code index}; returns once the kernel can write neither its
   * ring nor its landing region (the kernel is stopped for it and launched again by the next request).
   */
  public synchronized void detachReader(int index) {
    checkIndex(index);
    if (rings[index] == 0) {
      return;
    }
    SlipNative.clearServerReader(handle(), index);
    SlipNative.stopServer(handle());
    release(index);
    SlipNative.detachRing(rings[index]);
    rings[index] = 0;
  }

  /** Enters map output {@code mapId} of {@code shuffleId}: {@code nparts} blocks at base + offsets[p] (device addresses). */
  public void putOutput(int shuffleId, long mapId, long base, long offsets, long counts, int nparts) {
    putOutput(shuffleId, mapId, base, offsets, counts, nparts, null);
  }

  /**
   * Where a map output's bytes lie as a gpunetio WQE names them: registered region {@code id}
   * (iova {@code id << 40}), the output at {@code offset} in it; {@code key} the region's key on the
   * context (what queue sets of this process's software NIC present), {@code linkKey} its memory
   * key on the executor's NIC (what queue pairs of NIC links present: readers on other machines), 0
   * when it is not registered there.
   */
  public record NicSource(int id, int key, long offset, int linkKey) {}

  /**
   * As {@link #putOutput(int, long, long, long, long, int)}, with where gpunetio readers' WQEs read
   * it from ({@code nic} null: not registered; such readers are refused the output).
   */
  public void putOutput(int shuffleId, long mapId, long base, long offsets, long counts, int nparts, NicSource nic) {
    SlipNative.putServerOutput(handle(), shuffleId, mapId, base, offsets, counts, nparts, nic == null ? -1 : nic.id(),
        nic == null ? 0 : nic.key(), nic == null ? 0 : nic.offset(), nic == null ? 0 : nic.linkKey());
  }

  /**
   * Removes a map output: no push starts from it after the call, and the call returns once none
   * reads it, so its memory may be freed or moved. A push still reading it after {@code timeout}
   * (a slow landing) is waited for by stopping the kernel (the next request launches it again).
   */
  public void revokeOutput(int shuffleId, long mapId, Duration timeout) {
    String[] error = new String[1];
    int st = SlipNative.revokeServerOutput(handle(), shuffleId, mapId, timeout.toNanos(), error);
    if (st == SlipStatus.SLIP_ERR_TIMEOUT.code()) {
      SlipNative.stopServer(handle());
    } else if (st != 0) {
      throw new GpuException(SlipStatus.of(st), "directory entry of shuffle " + shuffleId + " map " + mapId + ": "
          + error[0]);
    }
  }

  /** Launches the kernel unless it is resident; whether it did. */
  public boolean start() {
    return SlipNative.startServer(handle(), false);
  }

  /** Whether the kernel is resident now. */
  public boolean resident() {
    return SlipNative.serverIsResident(handle());
  }

  /** Why the wake thread stopped, or null while it runs. */
  public RuntimeException wakeFailure() {
    return wakeFailure;
  }

  public Stats stats() {
    long[] s = SlipNative.serverStats(handle());
    return new Stats(s[0], s[1], s[2], (int) s[3]);
  }

  private void wakeLoop() {
    long pollNanos = settings.wakePoll().toNanos();
    try {
      while (!closed) {
        long h = handle;
        if (h != 0 && !SlipNative.serverIsResident(h)) {
          SlipNative.startServer(h, true);
        }
        LockSupport.parkNanos(pollNanos);
      }
    } catch (RuntimeException e) {
      if (!closed) {
        wakeFailure = e;
      }
    }
  }

  private long handle() {
    long h = handle;
    if (h == 0) {
      throw new IllegalStateException("resident server of device " + ctx.device() + " is closed");
    }
    return h;
  }

  private void checkIndex(int index) {
    if (index < 0 || index >= rings.length) {
      throw new IllegalArgumentException("reader entry " + index + ", expected 0.." + (rings.length - 1));
    }
  }

  /** Stops the kernel (requests being served finish), unmaps the rings and frees the server. */
  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    waker.interrupt();
    try {
      waker.join(TimeUnit.SECONDS.toMillis(10));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    long h = handle;
    handle = 0;
    SlipNative.stopServer(h);
    SlipNative.destroyServer(h);
    for (int i = 0; i < rings.length; i++) {
      if (rings[i] != 0) {
        release(i);
        SlipNative.detachRing(rings[i]);
        rings[i] = 0;
      }
    }
  }

  /** Undoes entry {@code index}'s ring registration on the NIC, once the kernel no longer posts for it. */
  private void release(int index) {
    Runnable r = releases[index];
    releases[index] = null;
    if (r != null) {
      r.run();
    }
  }
}
