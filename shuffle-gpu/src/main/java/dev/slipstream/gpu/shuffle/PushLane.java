package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.memory.MemoryPool;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.gpu.Backend;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuRegion;
import dev.slipstream.gpu.PushKernel;
import dev.slipstream.gpu.PushLauncher;
import dev.slipstream.gpu.QueueSet;
import dev.slipstream.gpu.SlipStatus;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.function.IntSupplier;

/**
 * What a holder keeps per reader landing region to push into it without per-request setup: a
 * queue set into its {@link LaneTarget} (nvlink stores or the software NIC's gpunetio WQEs into an
 * imported region, which find the map outputs' regions among those registered on the context; or
 * gpunetio WQEs on a slot of the NIC link to the reader, whose NIC finds them among those
 * registered on it; up to its data queues + 1, grown by doubling) over
 * {@code sources} source slots, the block-table slot and the landing region,
 * the table region (the block table and the push's arguments, copied together before each push),
 * and a {@link PushLauncher} (its own stream). A request rewrites the source slots with its map outputs' regions
 * ({@link QueueSet#setLocals}); the set is rebuilt only when a request has more map outputs than
 * slots or needs more queues (doubling), the table region only when a request's table and
 * arguments outgrow it.
 *
 * <p>Table order: source slots {@code 0..sources-1}, the table at {@code sources}, the landing at
 * {@code sources + 1}. Between requests a lane holds no map output (the slots are rewritten before
 * each push), so freeing a shuffle's outputs needs nothing from it. Threading: one request at a time
 * (its owner hands it between threads with a happens-before edge). Ownership: owns the set, the
 * table region, the launcher and its target (not the landing region an imported target names).
 */
final class PushLane implements AutoCloseable {
  private static final int FIRST_SOURCES = 4;
  private static final long FIRST_TABLE_BYTES = 4096;
  /** Data queues (CUDA blocks) a push spreads its pieces over by default, at most: about half an H200's 132 SMs. */
  static final int MAX_DATA_QUEUES = 64;
  /** Threads per push CUDA block by default. */
  static final int THREADS = 256;
  /** WQEs per queue pair of a gpunetio lane: a batch of the push kernel is at most this less one (its signal). */
  static final int GPUNETIO_DEPTH = 1024;

  private final GpuContext ctx;
  private final LaneTarget target;
  private final IntSupplier regionIds;
  private final MemoryPool tables;
  private final Backend backend;
  private final PushLauncher launcher;
  private final int maxDataQueues;
  private final int threads;
  private QueueSet qs;
  private int sources;
  private int queues;
  private GpuRegion table;
  private boolean tableSet;
  private long ready;

  /**
   * @param config the queue backend, the grid (data queues a push spreads its pieces over, at most;
   *     threads per CUDA block, checked by {@link PushScheduler} and again at launch) and the pool the
   *     lane's block-table staging region is reserved from
   */
  PushLane(GpuContext ctx, PushKernel kernel, LaneTarget target, IntSupplier regionIds, PushScheduler.Lanes config) {
    if (target.maxQueues() < 2) {
      throw new IllegalArgumentException("push lane: a target of " + target.maxQueues() + " queues, expected at least"
          + " 2 (a data queue and the table's)");
    }
    this.ctx = ctx;
    this.target = target;
    this.regionIds = regionIds;
    this.tables = config.tables();
    this.backend = target.backend(config.backend());
    this.maxDataQueues = Math.min(config.queues(), target.maxQueues() - 1);
    this.threads = config.threads();
    this.launcher = kernel.launcher();
  }

  /** False once its target may not be pushed into any more (a replaced NIC link). */
  boolean current() {
    return target.current();
  }

  /**
   * Its push failed or passed its deadline: the target is told (a NIC link is replaced). Never
   * throws: the push's outcome is reported whatever becomes of the target.
   */
  void failed() {
    try {
      target.failed();
    } catch (RuntimeException e) {
      org.slf4j.LoggerFactory.getLogger(PushLane.class).warn("Push lane: its target refused the failure report", e);
    }
  }

  /**
   * Pushes {@code items.get(i)} from {@code outputs.get(i)} and the block table {@code tableBytes}
   * to {@code tableOffset} of the landing region, every queue adding its (items, bytes) to the
   * signal word at {@code signalOffset} after its data; returns each queue's status, the table's
   * queue last. An output's items are spread round-robin over its share of the lane's data queues
   * (by item count, at least one), so large blocks move on many CUDA blocks at once. Does not wait:
   * {@link #finished} tells when the push ended, {@link #statuses} gives each queue's status (the
   * table's queue last); on an error status, {@link #error()} gives the text.
   */
  void start(List<GpuRegion> outputs, List<List<PushKernel.Item>> items, byte[] tableBytes, long tableOffset,
      long signalOffset) {
    int m = outputs.size();
    long total = items.stream().mapToLong(List::size).sum();
    int[] share = new int[m];
    int dataQueues = 0;
    for (int i = 0; i < m; i++) {
      long t = items.get(i).size();
      share[i] = (int) Math.max(1, Math.min(t, maxDataQueues * t / Math.max(1, total)));
      dataQueues += share[i];
    }
    // The table region holds the push's arguments with the block table among them (one copy, on
    // the lane's stream, before the push); the table's item reads it from there.
    long areaBytes = PushLauncher.areaBytes(tableBytes.length, dataQueues + 1, Math.toIntExact(total + 1));
    ensureCapacity(m, dataQueues + 1, areaBytes);
    if (m > 0) {
      // The lane's set is used by this lane's stream only, so the new source slots are copied there,
      // ordered before the push, with no synchronisation.
      QueueSet.StagedLocals staged = qs.stageLocals(0, outputs);
      launcher.write(staged.deviceAddress(), staged.image());
    }
    if (!tableSet) {
      qs.setLocals(sources, List.of(table));
      tableSet = true;
    }
    int landingIndex = sources + 1;
    List<PushKernel.Queue> cfg = new ArrayList<>(dataQueues + 1);
    List<List<PushKernel.Item>> perQueue = new ArrayList<>(dataQueues + 1);
    for (int i = 0; i < m; i++) {
      List<List<PushKernel.Item>> mine = new ArrayList<>(share[i]);
      for (int q = 0; q < share[i]; q++) {
        cfg.add(new PushKernel.Queue(i, landingIndex, landingIndex, signalOffset));
        mine.add(new ArrayList<>());
      }
      List<PushKernel.Item> its = items.get(i);
      for (int k = 0; k < its.size(); k++) {
        mine.get(k % share[i]).add(its.get(k));
      }
      perQueue.addAll(mine);
    }
    cfg.add(new PushKernel.Queue(sources, landingIndex, landingIndex, signalOffset));
    perQueue.add(List.of(new PushKernel.Item(PushLauncher.PREFIX_AT, tableOffset, tableBytes.length)));
    int batch = perQueue.stream().mapToInt(List::size).max().orElse(1);
    if (backend == Backend.GPUNETIO) {
      batch = Math.min(batch, GPUNETIO_DEPTH - 1); // a batch's writes and its signal fit the send queue
    }
    ready = System.nanoTime();
    launcher.start(qs, cfg, perQueue, batch, threads, tableBytes, table.devicePointer(), table.length());
  }

  /** Whether the push started last has ended; throws on a CUDA error of the lane's stream. */
  boolean finished() {
    return launcher.finished();
  }

  /** Whether the lane's stream has no work left, whatever became of its last push; throws on a CUDA error. */
  boolean idle() {
    return launcher.streamIdle();
  }

  /** Each queue's status of the push that {@link #finished}, the table's queue last. */
  SlipStatus[] statuses() {
    return launcher.statuses();
  }

  /**
   * {@link System#nanoTime()} of the last push: when the lane was set up for it (table copied, source
   * slots rewritten), when its launch call returned, and when its end was seen.
   */
  long readyNanos() {
    return ready;
  }

  long launchedNanos() {
    return launcher.launchedNanos();
  }

  long endedNanos() {
    return launcher.endedNanos();
  }

  /** Throws the first error completion of the last push, with its text, and clears it. */
  void error() {
    qs.check(true);
  }

  private void ensureCapacity(int outputs, int queuesNeeded, long tableLength) {
    if (table == null || table.length() < tableLength) {
      long want = FIRST_TABLE_BYTES;
      while (want < tableLength) {
        want *= 2;
      }
      if (!tables.tryReserve(want)) {
        throw new IllegalStateException("push lane: a block-table region of " + want + " bytes does not fit "
            + tables);
      }
      GpuRegion t;
      try {
        t = GpuRegion.create(ctx, MemoryKind.DEVICE, want, regionIds.getAsInt());
      } catch (RuntimeException e) {
        tables.release(want);
        throw e;
      }
      try {
        target.adopt(t);
      } catch (RuntimeException e) {
        t.close();
        tables.release(want);
        throw e;
      }
      closeTable();
      table = t;
      tableSet = false;
    }
    if (qs == null || outputs > sources || queuesNeeded > queues) {
      int k = Math.max(FIRST_SOURCES, sources);
      while (k < outputs) {
        k *= 2;
      }
      int nq = Math.max(FIRST_SOURCES + 1, queues);
      while (nq < queuesNeeded) {
        nq *= 2;
      }
      nq = Math.min(nq, target.maxQueues());
      // Every slot starts as the table region; a push rewrites the slots it uses first. A set over
      // a NIC link's queue pairs is made after the old one is gone (one set per queue pair).
      List<GpuRegion> locals = new ArrayList<>(Collections.nCopies(k + 1, table));
      if (qs != null) {
        qs.close();
        qs = null;
      }
      qs = target.queueSet(ctx, backend, nq, locals);
      sources = k;
      queues = qs.size();
      tableSet = true;
    }
  }

  @Override
  public void close() {
    if (qs != null) {
      qs.close();
      qs = null;
    }
    launcher.close();
    closeTable();
    target.close();
  }

  private void closeTable() {
    if (table != null) {
      long n = table.length();
      target.release(table);
      table.close();
      table = null;
      tables.release(n);
    }
  }
}
