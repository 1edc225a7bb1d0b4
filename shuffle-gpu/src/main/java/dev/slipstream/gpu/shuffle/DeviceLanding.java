package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.BlockTable;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.DeviceZeroer;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuRegion;
import dev.slipstream.gpu.RegionExport;
import dev.slipstream.gpu.SignalWatcher;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A reader's device landing region: one registered device region ({@link GpuRegion}, exported to
 * holders through its descriptor) from which requests reserve ranges for their blocks, block table
 * and signal word ({@link LandingRanges} keeps the ranges). {@link #prepare} lays a request out;
 * after the request was sent, {@link Fetch#await} waits for the signal (with a deadline), checks
 * the signal and the {@link BlockTable} against the request, and returns device-resident batches
 * that are views into the landing range until {@link Fetch#close()}.
 *
 * <p>Every range handed out is all zeros, so a request's signal word needs no reset (and its
 * sender no device synchronisation) before it is sent: the region is zeroed when it is made, and a
 * released range is zeroed in the background ({@link DeviceZeroer}) and becomes free again only
 * once that zeroing ended, which a reservation checks without waiting in the common case.
 *
 * <p>A request that ends before its holder finished (it timed out, its task failed) keeps its range
 * out of reach ({@link Fetch#retain}) until the holder answers that request ({@link #finished}),
 * the holder is lost ({@link #holderLost}) or the retention bound passes: a late push then lands
 * in memory no other request holds (docs/gpu.md, "Landing ranges belong to one request").
 *
 * <p>Threading: thread-safe; a daemon thread releases retained ranges whose bound passed.
 * Ownership: owns the region; {@link #close()} frees it and fails loudly if ranges are still
 * reserved (their memory is freed regardless; retained ranges are released by the close).
 */
public final class DeviceLanding implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DeviceLanding.class);
  private final GpuContext ctx;
  private final GpuRegion region;
  private final RegionExport export;
  private final DeviceZeroer zeroer;
  private final LandingRanges ranges;
  /** Request ids: the node's sequence, so that an answer finds its request among all the node sent. */
  private final java.util.function.LongSupplier requestIds;
  private final Deque<SignalWatcher> watchers = new ArrayDeque<>();
  private boolean closed;

  /** The reader a request names until its sender says who it is ({@link WriteRequest#from}). */
  static final dev.slipstream.core.shuffle.NodeIdentity NO_READER = new dev.slipstream.core.shuffle.NodeIdentity("", "");
  /** The budget a request carries until its sender sets its own (a day). */
  static final long MAX_BUDGET_MILLIS = 24L * 3600 * 1000;

  /** A landing region whose requests take ids of their own (one process, no shuffle node). */
  public DeviceLanding(GpuContext ctx, long bytes, int regionId) {
    this(ctx, bytes, regionId, new java.util.concurrent.atomic.AtomicLong(1)::getAndIncrement);
  }

  /** @param requestIds the ids of this region's write requests ({@code ShuffleNode#nextRequestId}) */
  public DeviceLanding(GpuContext ctx, long bytes, int regionId, java.util.function.LongSupplier requestIds) {
    this.requestIds = requestIds;
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
    this.export = region.export();
    this.ranges = new LandingRanges(region.length(), this::zeroRange, System::nanoTime);
  }

  /** Zeroes a released range on the zeroer's stream (called under the ranges' lock). */
  private LandingRanges.Ticket zeroRange(long offset, long length) {
    DeviceZeroer.Ticket t = zeroer.zero(region.devicePointer() + offset, length);
    return new LandingRanges.Ticket() {
      @Override
      public boolean done() {
        return t.done();
      }

      @Override
      public void await() {
        t.await();
      }

      @Override
      public void close() {
        t.close();
      }
    };
  }

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

  /** What peers of this machine map the region by (registered in the peer table). */
  public RegionExport export() {
    return export;
  }

  /** The region itself (holders in this process push into an alias of it). */
  public GpuRegion region() {
    return region;
  }

  public long capacity() {
    return region.length();
  }

  /** Bytes reserved by requests, those retained for holders included. */
  public long used() {
    return ranges.used();
  }

  /** Bytes retained for holders that may still write into them ({@link Fetch#retain}). */
  public long retainedBytes() {
    return ranges.retainedBytes();
  }

  /** Ranges retained for holders now. */
  public int retainedRanges() {
    return ranges.retainedRanges();
  }

  /** The most bytes retained at once since start. */
  public long peakRetainedBytes() {
    return ranges.peakRetainedBytes();
  }

  /** Retained ranges released because the holder answered, or because the bound passed, since start. */
  public long releasedAnswered() {
    return ranges.released(LandingRanges.Release.ANSWERED);
  }

  public long releasedByBound() {
    return ranges.released(LandingRanges.Release.BOUND);
  }

  /**
   * The holder answered request {@code requestId} (refused, failed, or pushed: a holder answers once
   * its push can store nothing more); its range, if retained, is released now.
   */
  public void finished(long requestId) {
    LandingRanges.Retained r = ranges.finished(requestId);
    if (r != null) {
      LOG.info("Device landing: holder {} answered request {}; its retained range of {} bytes is released",
          r.holder(), requestId, r.length());
    }
  }

  /** Holder {@code executorId} left the cluster: every range retained for it is released now. */
  public void holderLost(String executorId) {
    List<LandingRanges.Retained> rs = ranges.holderLost(executorId);
    if (!rs.isEmpty()) {
      LOG.info("Device landing: holder {} was lost; {} retained ranges ({} bytes) released", executorId, rs.size(),
          rs.stream().mapToLong(LandingRanges.Retained::length).sum());
    }
  }

  private void releaseDue() {
    for (LandingRanges.Retained r : ranges.releaseDue()) {
      LOG.warn("Device landing: holder {} never answered request {}; its range [{}, {}) is released {} ms after it"
          + " was retained (the reader's deadline plus spark.slipstream.gpu.landing.retainGrace)", r.holder(),
          r.requestId(), r.offset(), r.offset() + r.length(), (System.nanoTime() - r.retainedAt()) / 1_000_000L);
    }
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
      need += Math.max(WriteRequest.DEVICE_ALIGN, BatchLayout.align16(w.capacity()));
    }
    long tableAt = need;
    need += BatchLayout.align16(BlockTable.bytes(wants.size()));
    long signalAt = need;
    need += 16;
    long base;
    if (orThrow) {
      base = ranges.reserve(need, deadlineNanos);
    } else if ((base = ranges.tryReserve(need)) < 0) {
      return null;
    }
    long id = requestIds.getAsLong();
    List<ShuffleMessages.Entry> entries = new ArrayList<>(wants.size());
    long at = base;
    for (Want w : wants) {
      long capacity = Math.max(WriteRequest.DEVICE_ALIGN, BatchLayout.align16(w.capacity()));
      entries.add(new ShuffleMessages.Entry(w.mapAttemptId(), w.partition(), 0, capacity, at));
      at += capacity;
    }
    Fetch f = new Fetch(base, need);
    try {
      f.request = new WriteRequest(id, shuffleId, NO_READER, MAX_BUDGET_MILLIS, export.descriptor(), base + tableAt,
          base + signalAt, entries, widths, WriteRequest.ANSWER_SERVED).check();
      return f;
    } catch (RuntimeException | TransportException e) {
      f.close();
      throw e;
    }
  }

  /** Gives a range back: zeroed in the background, free once that ended. */
  private void release(long off, long len) {
    ranges.release(off, len);
  }

  /** One request's landing range. Close it once the batches it returned are no longer used. */
  public final class Fetch implements AutoCloseable {
    private final long base;
    private final long length;
    private WriteRequest request;
    private boolean open = true;
    /** Held from {@link #begin} until the signal was seen or the wait abandoned. */
    private SignalWatcher watcher;

    private Fetch(long base, long length) {
      this.base = base;
      this.length = length;
    }

    public WriteRequest request() {
      return request;
    }

    /** Bytes of the landing region this request holds (blocks, table and signal). */
    public long length() {
      return length;
    }

    /** The block count the signal reaches when everything has landed ({@link WriteRequest#expectedPieces()}). */
    public long expectedPieces() {
      return request.expectedPieces();
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
            expectedPieces() << 40);
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

    /** Checks the signal and the table ({@link BlockTable#check}); the blocks as views into this range. */
    private List<DeviceBatch> landed(long sig, ByteBuffer t) throws TransportException {
      int[] widths = request.widths();
      List<LandedBlocks.Landed> blocks = LandedBlocks.check(request, sig, t);
      List<DeviceBatch> out = new ArrayList<>(blocks.size());
      for (int i = 0; i < blocks.size(); i++) {
        BatchLayout packed = BatchLayout.packed(blocks.get(i).rows(), widths);
        out.add(DeviceBatch.view(ctx.device(), region.devicePointer() + request.entries().get(i).landingOffset(),
            packed));
      }
      return out;
    }

    private TransportException timedOut(long sig) {
      return new TransportException(TransportError.TIMEOUT, "device write request " + request.requestId()
          + ": signal at " + (sig >>> 40) + " of " + expectedPieces() + " blocks by the deadline");
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
     * For a request that was sent and ended before its holder finished it (timed out, refused by the
     * transport, its task failed): stops waiting for its signal now and keeps its range out of reach
     * of every other request until holder {@code holder} answers it ({@link DeviceLanding#finished}),
     * is lost ({@link DeviceLanding#holderLost}), or {@code releaseByNanos} (System.nanoTime())
     * passes; then it is zeroed and free. Idempotent with {@link #close()}: whichever comes first counts.
     */
    public void retain(String holder, long releaseByNanos) {
      if (!open) {
        return;
      }
      if (watcher != null) {
        abandon();
      }
      open = false;
      LandingRanges.Retained r = ranges.retain(request.requestId(), holder, base, length, releaseByNanos);
      LOG.info("Device landing: request {} to holder {} ended before the holder finished it; its range of {} bytes is"
          + " retained until the holder answers or is lost, at most {} ms ({} bytes retained in {} ranges)",
          request.requestId(), holder, length, Math.max(0, (releaseByNanos - r.retainedAt()) / 1_000_000L),
          ranges.retainedBytes(), ranges.retainedRanges());
      scheduleRelease(releaseByNanos);
    }
  }

  private void scheduleRelease(long atNanos) {
    try {
      bound.schedule(this::releaseDue, Math.max(0, atNanos - System.nanoTime()),
          java.util.concurrent.TimeUnit.NANOSECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      // closed: the close released every retained range
    }
  }

  /** Releases retained ranges whose bound passed. */
  private final java.util.concurrent.ScheduledExecutorService bound =
      java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "slipstream-gpu-landing-retention");
        t.setDaemon(true);
        return t;
      });

  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      watchers.forEach(SignalWatcher::close);
      watchers.clear();
    }
    bound.shutdownNow();
    long outstanding;
    try {
      outstanding = ranges.close(zeroer::close); // waits for the zeroings queued; none is queued after
    } finally {
      region.close();
    }
    if (outstanding > 0) {
      throw new IllegalStateException("device landing region closed with " + outstanding + " bytes still reserved");
    }
  }
}
