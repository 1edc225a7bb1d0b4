package dev.slipstream.core.gpu.shuffle;

import dev.slipstream.core.gpu.DeviceZeroer;
import dev.slipstream.core.gpu.GpuContext;
import dev.slipstream.core.gpu.GpuRegion;
import dev.slipstream.core.gpu.MemoryKind;
import dev.slipstream.core.gpu.RegionDescriptor;
import dev.slipstream.core.gpu.SignalWatcher;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.TreeMap;

/**
 * A reader's device landing region: one registered device region ({@link GpuRegion}, exported to
 * holders through its descriptor) from which requests reserve ranges for their blocks, block table
 * and signal word. {@link #prepare} lays a request out; after the request was sent,
 * {@link Fetch#await} waits for the signal (with a deadline), checks the table, and returns
 * device-resident batches that are views into the landing range until {@link Fetch#close()}.
 *
 * <p>Every range handed out is all zeros, so a request's signal word needs no reset (and its
 * sender no device synchronisation) before it is sent: the region is zeroed when it is made, and a
 * released range is zeroed in the background ({@link DeviceZeroer}) and becomes free again only
 * once that zeroing ended, which a reservation checks without waiting in the common case.
 *
 * <p>Threading: thread-safe; a daemon thread releases quarantined ranges. Ownership: owns the
 * region; {@link #close()} frees it and fails loudly if ranges are still reserved or quarantined
 * (their memory is freed regardless).
 */
public final class DeviceLanding implements AutoCloseable {
  private final GpuContext ctx;
  private final GpuRegion region;
  private final RegionDescriptor descriptor;
  private final TreeMap<Long, Long> free = new TreeMap<>(); // offset -> length
  /** Released ranges being zeroed, oldest first; free once their zeroing ended. */
  private final Deque<Zeroing> zeroing = new ArrayDeque<>();
  private final DeviceZeroer zeroer;
  private long used;
  private long nextRequestId = 1;
  private final Deque<SignalWatcher> watchers = new ArrayDeque<>();
  private boolean closed;

  public DeviceLanding(GpuContext ctx, long bytes, int regionId) {
    if (bytes < 64) {
      throw new IllegalArgumentException("device landing region of " + bytes + " bytes, expected at least 64");
    }
    this.ctx = ctx;
    this.region = GpuRegion.create(ctx, MemoryKind.DEVICE, bytes, regionId);
    DeviceZeroer z = null;
    try {
      region.fill((byte) 0); // synchronous: the first ranges are zero
      z = new DeviceZeroer(ctx);
    } catch (RuntimeException e) {
      region.close();
      throw e;
    }
    this.zeroer = z;
    this.descriptor = region.exportDescriptor();
    free.put(0L, region.length());
  }

  private record Zeroing(long offset, long length, DeviceZeroer.Ticket ticket) {}

  private synchronized SignalWatcher takeWatcher() {
    if (closed) {
      throw new IllegalStateException("device landing region is closed");
    }
    SignalWatcher w = watchers.pollFirst();
    return w != null ? w : SignalWatcher.create(ctx);
  }

  private synchronized void giveBack(SignalWatcher w) {
    if (closed) {
      w.close();
    } else {
      watchers.addFirst(w);
    }
  }

  public RegionDescriptor descriptor() {
    return descriptor;
  }

  /** The region itself (holders in this process push into an alias of it). */
  public GpuRegion region() {
    return region;
  }

  public long capacity() {
    return region.length();
  }

  public synchronized long used() {
    return used;
  }

  /** What a reader asks of one holder: block {@code (mapAttemptId, partition)} into at most {@code capacity} bytes. */
  public record Want(long mapAttemptId, int partition, long capacity) {}

  /**
   * Reserves space for {@code wants} (capacities rounded up to 16 bytes), a block table and a
   * signal (zero), and returns the request to send. Throws {@link IllegalStateException}
   * when the landing region has no free range that large (the caller sends fewer blocks at once).
   */
  public Fetch prepare(int shuffleId, int[] widths, List<Want> wants) throws TransportException {
    return prepare(shuffleId, widths, wants, System.nanoTime());
  }

  /**
   * As {@link #prepare(int, int[], List)}, but waits for other requests to release space until
   * {@code deadlineNanos} (System.nanoTime()) before it gives up.
   */
  public Fetch prepare(int shuffleId, int[] widths, List<Want> wants, long deadlineNanos) throws TransportException {
    return layOut(shuffleId, widths, wants, deadlineNanos, true);
  }

  /**
   * As {@link #prepare(int, int[], List)} for several requests at once, without waiting or throwing
   * for space: in order, reserves space for each while the region has a free range large enough
   * (stopping at the first that has none; a caller with requests in flight waits for those). Returns
   * the requests prepared, possibly none.
   */
  public List<Fetch> tryPrepareAll(int shuffleId, int[] widths, List<List<Want>> requests) throws TransportException {
    List<Fetch> out = new ArrayList<>(requests.size());
    try {
      for (List<Want> wants : requests) {
        Fetch f = layOut(shuffleId, widths, wants, System.nanoTime(), false);
        if (f == null) {
          break;
        }
        out.add(f);
      }
      return out;
    } catch (RuntimeException | TransportException e) {
      out.forEach(Fetch::close);
      throw e;
    }
  }

  /**
   * Reserves and lays out one request (blocks, then table, then signal); its signal is not reset yet.
   * Without space: waits until {@code deadlineNanos} then throws ({@code orThrow}), or returns null.
   */
  private Fetch layOut(int shuffleId, int[] widths, List<Want> wants, long deadlineNanos, boolean orThrow)
      throws TransportException {
    long need = 0;
    for (Want w : wants) {
      if (w.capacity() < 0) {
        throw new IllegalArgumentException("capacity " + w.capacity() + " of block (" + w.mapAttemptId() + ", "
            + w.partition() + "), expected >= 0");
      }
      need += BatchLayout.align16(w.capacity());
    }
    long tableAt = need;
    need += BatchLayout.align16((long) DeviceWriteRequest.TABLE_ENTRY * wants.size());
    long signalAt = need;
    need += 16;
    long base;
    long id;
    synchronized (this) {
      if (orThrow) {
        base = reserve(need, deadlineNanos);
      } else if (need > region.length() || (base = tryReserve(need)) < 0) {
        return null;
      }
      id = nextRequestId++;
    }
    List<DeviceWriteRequest.Entry> entries = new ArrayList<>(wants.size());
    long at = base;
    for (Want w : wants) {
      entries.add(new DeviceWriteRequest.Entry(w.mapAttemptId(), w.partition(), at, BatchLayout.align16(w.capacity())));
      at += BatchLayout.align16(w.capacity());
    }
    Fetch f = new Fetch(base, need);
    try {
      f.request = new DeviceWriteRequest(id, shuffleId, descriptor(), base + tableAt, base + signalAt, widths, entries)
          .check();
      return f;
    } catch (RuntimeException | TransportException e) {
      f.close();
      throw e;
    }
  }

  private long reserve(long bytes, long deadlineNanos) {
    if (bytes > region.length()) {
      throw new IllegalStateException("device landing region: " + bytes + " bytes asked, more than the region's "
          + region.length() + " (spark.slipstream.gpu.landing.bytes)");
    }
    for (;;) {
      long at = tryReserve(bytes);
      if (at >= 0) {
        return at; // tryReserve has waited for every range still being zeroed
      }
      long left = deadlineNanos - System.nanoTime();
      if (left <= 0) {
        throw new IllegalStateException("device landing region: no free range of " + bytes + " bytes (" + used
            + " of " + region.length() + " in use; spark.slipstream.gpu.landing.bytes)");
      }
      try {
        wait(Math.max(1, java.util.concurrent.TimeUnit.NANOSECONDS.toMillis(left)));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while waiting for device landing space", e);
      }
    }
  }

  /** A free range of {@code bytes}, or -1: ranges whose zeroing ended are free first, then those still zeroing are waited for. */
  private long tryReserve(long bytes) {
    reapZeroed();
    long at = takeFree(bytes);
    while (at < 0 && !zeroing.isEmpty()) {
      awaitOldestZeroing();
      at = takeFree(bytes);
    }
    return at;
  }

  /** Moves released ranges whose zeroing ended into the free list, oldest first. */
  private void reapZeroed() {
    while (!zeroing.isEmpty() && zeroing.peekFirst().ticket().done()) {
      freeZeroed(zeroing.pollFirst());
    }
  }

  private void awaitOldestZeroing() {
    Zeroing z = zeroing.pollFirst();
    z.ticket().await();
    freeZeroed(z);
  }

  private void freeZeroed(Zeroing z) {
    z.ticket().close();
    long off = z.offset();
    long len = z.length();
    Long next = off + len;
    Long nextLen = free.remove(next);
    if (nextLen != null) {
      len += nextLen;
    }
    var prev = free.floorEntry(off);
    if (prev != null && prev.getKey() + prev.getValue() == off) {
      off = prev.getKey();
      len += prev.getValue();
    }
    free.put(off, len);
    notifyAll();
  }

  private long takeFree(long bytes) {
    for (var e : free.entrySet()) {
      if (e.getValue() >= bytes) {
        long off = e.getKey();
        long len = e.getValue();
        free.remove(off);
        if (len > bytes) {
          free.put(off + bytes, len - bytes);
        }
        used += bytes;
        return off;
      }
    }
    return -1;
  }

  /** Gives a range back: zeroed in the background, free once that ended. */
  private synchronized void release(long off, long len) {
    used -= len;
    if (closed) {
      return;
    }
    zeroing.addLast(new Zeroing(off, len, zeroer.zero(region.devicePointer() + off, len)));
    notifyAll(); // a reserve waiting for space takes it once its zeroing ended
  }

  /** One request's landing range. Close it once the batches it returned are no longer used. */
  public final class Fetch implements AutoCloseable {
    private final long base;
    private final long length;
    private DeviceWriteRequest request;
    private boolean open = true;
    /** Held from {@link #begin} until the signal was seen or the wait abandoned. */
    private SignalWatcher watcher;

    private Fetch(long base, long length) {
      this.base = base;
      this.length = length;
    }

    public DeviceWriteRequest request() {
      return request;
    }

    /** Bytes of the landing region this request holds (blocks, table and signal). */
    public long length() {
      return length;
    }

    /** The block count the signal reaches when everything has landed ({@link DeviceWriteRequest#expectedBlocks()}). */
    public long expectedBlocks() {
      return request.expectedBlocks();
    }

    /**
     * Starts watching this request's signal ({@link SignalWatcher}: polled with copies, no stream
     * blocks on it): call it once the request was sent. Idempotent; {@link #poll} and
     * {@link #await} begin it themselves.
     */
    public void begin() {
      if (watcher != null || !open) {
        return;
      }
      // Once the signal is seen complete, the table and the signal (adjacent: prepare lays them
      // out so) are copied to pinned host memory after it.
      long from = request.tableOffset();
      int len = Math.toIntExact(request.signalOffset() + 8 - from);
      SignalWatcher w = takeWatcher();
      try {
        w.begin(region.devicePointer() + from, len, region.devicePointer() + request.signalOffset(),
            expectedBlocks() << 40);
      } catch (RuntimeException e) {
        giveBack(w);
        throw e;
      }
      watcher = w;
    }

    /**
     * The landed blocks (as {@link #await} returns them) once the signal says every block and the
     * table have landed, else null; does not block.
     */
    public List<DeviceBatch> poll() throws TransportException {
      if (!open) {
        throw new IllegalStateException("device write request " + request.requestId() + ": its landing range was"
            + " released");
      }
      begin();
      SignalWatcher.Seen seen = watcher.poll();
      if (seen == null) {
        return null;
      }
      giveBack(watcher);
      watcher = null;
      long sig = seen.signal();
      ByteBuffer t = seen.range();
      return landed(sig, t);
    }

    /**
     * Waits until the signal says every block and the table have landed, or throws
     * {@link TransportException} (TIMEOUT) at {@code deadlineNanos} (System.nanoTime()); then checks
     * the table and returns one batch per entry, in request order: views into this range.
     */
    public List<DeviceBatch> await(long deadlineNanos) throws TransportException {
      long pause = 1;
      for (;;) {
        List<DeviceBatch> out = poll();
        if (out != null) {
          return out;
        }
        if (System.nanoTime() - deadlineNanos > 0) {
          throw timedOut(abandon());
        }
        java.util.concurrent.locks.LockSupport.parkNanos(pause * 1000);
        pause = Math.min(200, pause * 2);
      }
    }

    /** Stops watching the signal (a copy in flight finishes first); returns the signal as read now. */
    public long abandon() {
      if (watcher == null) {
        return signalNow();
      }
      try {
        return watcher.cancel().signal();
      } finally {
        giveBack(watcher);
        watcher = null;
      }
    }

    private long signalNow() {
      return ByteBuffer.wrap(region.read(request.signalOffset(), 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    /** Checks the signal's count and each table entry; the blocks as views into this range. */
    private List<DeviceBatch> landed(long sig, ByteBuffer t) throws TransportException {
      if ((sig >>> 40) != expectedBlocks()) {
        throw new TransportException(TransportError.INTERNAL, "device write request " + request.requestId()
            + ": signal counted " + (sig >>> 40) + " blocks, expected " + expectedBlocks());
      }
      int[] widths = request.widths();
      List<DeviceBatch> out = new ArrayList<>(request.entries().size());
      for (DeviceWriteRequest.Entry e : request.entries()) {
        long bytes = t.getLong();
        long rows = t.getLong();
        if (rows < 0 || rows >= (1L << 32) || bytes > e.capacity() || BatchLayout.packedBytes(rows, widths) > bytes) {
          throw new TransportException(TransportError.MALFORMED, "device write request " + request.requestId()
              + ": block (" + e.mapAttemptId() + ", " + e.partition() + ") reported " + bytes + " bytes and " + rows
              + " rows, expected rows in [0, 2^32) packed in at most the capacity " + e.capacity() + " bytes");
        }
        BatchLayout packed = BatchLayout.packed(rows, widths);
        out.add(DeviceBatch.view(ctx.device(), region.devicePointer() + e.landingOffset(), packed));
      }
      return out;
    }

    private TransportException timedOut(long sig) {
      return new TransportException(TransportError.TIMEOUT, "device write request " + request.requestId()
          + ": signal at " + (sig >>> 40) + " of " + expectedBlocks() + " blocks by the deadline");
    }

    @Override
    public void close() {
      if (open) {
        if (watcher != null) {
          abandon();
        }
        open = false;
        release(base, length);
      }
    }

    /**
     * For a request that failed or timed out: stops waiting for its signal now, and, since the
     * holder may still be writing into this range, releases it only after {@code delayMs} (the host
     * path quarantines landing space the same way).
     */
    public void quarantine(long delayMs) {
      if (open) {
        if (watcher != null) {
          abandon();
        }
        quarantine.schedule(this::close, delayMs, java.util.concurrent.TimeUnit.MILLISECONDS);
      }
    }
  }

  private final java.util.concurrent.ScheduledExecutorService quarantine =
      java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "slipstream-gpu-landing-quarantine");
        t.setDaemon(true);
        return t;
      });

  @Override
  public synchronized void close() {
    closed = true;
    watchers.forEach(SignalWatcher::close);
    watchers.clear();
    quarantine.shutdownNow();
    long outstanding = used;
    try {
      zeroer.close(); // waits for the zeroings queued
    } finally {
      zeroing.forEach(z -> z.ticket().close());
      zeroing.clear();
      region.close();
    }
    if (outstanding > 0) {
      used = 0;
      throw new IllegalStateException("device landing region closed with " + outstanding + " bytes still reserved");
    }
  }
}
