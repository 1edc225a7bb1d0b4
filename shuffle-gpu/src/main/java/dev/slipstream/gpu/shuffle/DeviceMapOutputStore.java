package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.memory.MemoryPool;
import dev.slipstream.core.shuffle.ShuffleRemovals;
import dev.slipstream.gpu.GpuException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Map outputs of GPU shuffles, kept in registered device memory ({@link OutputSpace}) as the
 * partition kernel wrote them: one block per map task attempt with each reduce partition's
 * contiguous section at {@code offsets[p]}. Device memory is accounted in the pool {@code device}
 * (a node of the executor's accounting tree, beside the host pools); when a new output does not
 * fit, the oldest committed outputs that no push is reading are copied to host memory (accounted in
 * {@code host}) and their device memory is freed. When the host budget is spent too and the store has a
 * spill folder, the oldest outputs in host memory move on to a file each there (or an output that
 * does not fit the host budget goes straight from the device to its file); disk is the last tier and
 * has no budget of its own. A spilled output is copied back to the device when a holder must push
 * it, and its host bytes or file are freed. Spilling copies under the store's lock: a map task
 * that needs room waits for it.
 *
 * <p>Threading: thread-safe (one lock). Ownership: the store owns every block it was given;
 * {@link #removeShuffle} frees a shuffle's outputs (deferred while a push still reads one), and
 * {@link #close()} frees everything and fails loudly if a push still held an output.
 */
public final class DeviceMapOutputStore implements AutoCloseable {
  private final OutputSpace space;
  private final MemoryPool device;
  private final MemoryPool host;
  /** The root of the pools this store made for itself (closed with it); null when they are the caller's. */
  private final MemoryPool ownedPools;
  private final Map<Key, Output> outputs = new LinkedHashMap<>(); // insertion order = spill order
  /** Which shuffles were removed when: an output of a task begun before its shuffle's removal is freed. */
  private final ShuffleRemovals removals = new ShuffleRemovals();
  private long spills;
  private long restores;
  /** Outputs spilled to disk; null: no disk tier. */
  private final DeviceSpillFolder disk;
  /** Device bytes of spans brought back for pushes: pinned, and not among the outputs. */
  private long spanBytes;
  private boolean closed;
  /** Who follows the outputs in device memory (null: nobody). */
  private DeviceResidency residency;

  record Key(int shuffleId, long mapAttemptId) {}

  /** One map attempt's partitioned output. Fields under the store's lock. */
  static final class Output {
    final Key key;
    final int[] widths;
    final long[] offsets;
    final long[] counts;
    OutputSpace.Block device;
    byte[] host;
    /** The output's bytes on disk (neither on the device nor in host memory), or null. */
    Path file;
    int pins;
    boolean removed;
    /** The residency was told this output arrived and not yet that it leaves. */
    boolean followed;
    /** A span of a spilled output brought back for one push ({@link #pin(int, long, int, int, long)}), not in the map. */
    boolean span;
    /** Per-partition checksums a reader of the host transport was served (StagedBlocks); null until the first. */
    long[] checksums;
    boolean[] summed;

    Output(Key key, int[] widths, long[] offsets, long[] counts, OutputSpace.Block device) {
      this.key = key;
      this.widths = widths;
      this.offsets = offsets;
      this.counts = counts;
      this.device = device;
    }

    long bytes() {
      return offsets[offsets.length - 1];
    }
  }

  /**
   * @param device the pool device bytes are reserved from (its limit is the device budget)
   * @param host the pool spilled outputs' host bytes are reserved from (its limit: the host budget)
   */
  public DeviceMapOutputStore(OutputSpace space, MemoryPool device, MemoryPool host) {
    this(space, device, host, null);
  }

  /**
   * @param diskDir the folder outputs move to when both budgets are spent (created when first
   *     needed; the caller deletes it), or null for none: then a map task whose output does not fit
   *     fails naming both budgets
   */
  public DeviceMapOutputStore(OutputSpace space, MemoryPool device, MemoryPool host, Path diskDir) {
    this(space, new Pools(null, device, host), diskDir);
  }

  /** A store with pools of its own, {@code deviceBudget} and {@code hostBudget} bytes (tests, benchmarks). */
  public DeviceMapOutputStore(OutputSpace space, long deviceBudget, long hostBudget) {
    this(space, deviceBudget, hostBudget, null);
  }

  /** As {@link #DeviceMapOutputStore(OutputSpace, long, long)}, spilling to {@code diskDir} when both are spent. */
  public DeviceMapOutputStore(OutputSpace space, long deviceBudget, long hostBudget, Path diskDir) {
    this(space, ownPools(deviceBudget, hostBudget), diskDir);
  }

  private record Pools(MemoryPool owned, MemoryPool device, MemoryPool host) {}

  private DeviceMapOutputStore(OutputSpace space, Pools pools, Path diskDir) {
    if (pools.device().limit() <= 0 || pools.host().limit() < 0) {
      throw new IllegalArgumentException("device map-output store: device budget " + pools.device().limit()
          + ", host budget " + pools.host().limit() + "; expected a device budget > 0 and a host budget >= 0");
    }
    this.space = space;
    this.device = pools.device();
    this.host = pools.host();
    this.ownedPools = pools.owned();
    this.disk = diskDir == null ? null : new DeviceSpillFolder(diskDir);
  }

  /** Pools of {@code deviceBudget} and {@code hostBudget} bytes; the constructor checks the budgets. */
  private static Pools ownPools(long deviceBudget, long hostBudget) {
    MemoryPool root = MemoryPool.root("device-map-output", deviceBudget + hostBudget);
    return new Pools(root, root.child("device", deviceBudget), root.child("host", hostBudget));
  }

  /** A block of the space with its bytes reserved in the device pool (room was made for it). */
  private OutputSpace.Block reserved(long bytes) {
    OutputSpace.Block b = deviceBlock(bytes);
    try {
      reserve(device, b.length());
    } catch (IllegalStateException e) {
      b.close();
      throw e;
    }
    return b;
  }

  /**
   * A block of the space. The budget counts on device memory that other users of the GPU may hold
   * when the block is asked for (an engine's memory pool, such as RAPIDS', grows into what is free):
   * when the GPU refuses the block, the outputs no push or reader holds move to host memory or disk,
   * oldest first, and the block is asked for again each time as many bytes as it needs have left. A
   * map task fails, naming the budget and what the GPU said, only when it is still refused with no
   * such output left.
   */
  private OutputSpace.Block deviceBlock(long bytes) {
    GpuException refused;
    try {
      return space.allocate(bytes);
    } catch (GpuException e) {
      refused = e;
    }
    long moved = 0;
    for (Output o : outputs.values()) {
      if (o.device == null || o.pins > 0) {
        continue;
      }
      long n = o.device.length();
      spill(o);
      if (o.device != null) {
        continue; // neither host memory nor disk took it
      }
      moved += n;
      if (moved >= bytes) {
        try {
          return space.allocate(bytes);
        } catch (GpuException e) {
          refused = e;
        }
      }
    }
    throw new IllegalStateException("device map-output store: the GPU refused " + bytes + " more bytes ("
        + refused.getMessage() + ") with " + device.used() + " of the " + device.limit() + " budgeted bytes"
        + " (spark.slipstream.gpu.mapOutput.memoryBytes) in use and " + moved + " bytes of outputs moved to host"
        + " memory or disk, none left to move: other users of the GPU hold the rest (an engine's memory pool, such"
        + " as RAPIDS' spark.rapids.memory.gpu.allocFraction); leave the budget room beside them", refused);
  }

  /** Reserves {@code n} bytes in {@code pool}; the caller checked they fit. */
  private static void reserve(MemoryPool pool, long n) {
    if (!pool.tryReserve(n)) {
      throw new IllegalStateException("device map-output store: " + n + " bytes do not fit " + pool + " (or one of"
          + " its ancestors)");
    }
  }

  /**
   * Allocates {@code bytes} of device memory for a map task's output, first spilling older outputs
   * to host memory when the device budget would be exceeded. The caller commits it with
   * {@link #commit} or closes it.
   */
  public synchronized OutputSpace.Block allocate(long bytes) {
    return allocate(bytes, 0L);
  }

  /**
   * As {@link #allocate(long)}, but while the device budget is held by blocks other map tasks are
   * still writing (or by outputs pushes are reading), waits for them to be committed or released
   * until {@code deadline} ({@link System#nanoTime()}; 0: no waiting), then throws as {@link
   * #allocate(long)} does: with more map tasks at once than the budget holds outputs of, the later
   * ones wait for the earlier ones' outputs to become movable instead of failing.
   */
  public synchronized OutputSpace.Block allocate(long bytes, long deadline) {
    ensureOpen();
    if (bytes <= 0 || bytes > device.limit()) {
      throw new IllegalArgumentException("device map output of " + bytes + " bytes, expected 1.." + device.limit()
          + " (spark.slipstream.gpu.mapOutput.memoryBytes)");
    }
    awaitRoom(bytes, deadline);
    makeRoom(bytes);
    return new AccountedBlock(reserved(bytes));
  }

  private void makeRoom(long bytes) {
    Iterator<Output> it = outputs.values().iterator();
    while (device.used() + bytes > device.limit() && it.hasNext()) {
      Output o = it.next();
      if (o.device != null && o.pins == 0) {
        spill(o);
      }
    }
    if (device.used() + bytes > device.limit()) {
      throw new IllegalStateException("device map-output store: " + bytes + " bytes do not fit: " + device.used()
          + " of " + device.limit() + " device bytes in use by outputs that map tasks are writing or that readers and"
          + " pushes hold, or the host budget of "
          + host.limit() + " bytes (" + host.used() + " in use) is spent"
          + (disk == null ? " and there is no spill folder"
              : disk.lastError() == null ? "" : " and spilling to " + disk.dir() + " failed: " + disk.lastError()));
    }
  }

  /** Moves a device-resident, unpinned output to host memory, else to disk; leaves it where it is if neither takes it. */
  private void spill(Output o) {
    long n = o.bytes();
    boolean toHost = n <= Integer.MAX_VALUE - 16 && (host.tryReserve(n) || (hostToDisk(n) && host.tryReserve(n)));
    if (toHost) {
      byte[] copy = new byte[(int) n];
      o.device.read(0, copy, 0, (int) n);
      o.host = copy;
    } else if (!writeFile(o, o.device, null)) {
      return; // stays on the device; makeRoom reports if nothing else frees enough
    }
    leaving(o);
    release(o.device);
    o.device = null;
    spills++;
  }

  /**
   * Moves the oldest outputs in host memory to disk until {@code need} more host bytes fit; false
   * when there is no spill folder or not enough moved.
   */
  private boolean hostToDisk(long need) {
    if (disk == null || need > host.limit()) {
      return false;
    }
    for (Output o : outputs.values()) {
      if (host.used() + need <= host.limit()) {
        break;
      }
      if (o.host != null && writeFile(o, null, o.host)) {
        host.release(o.host.length);
        o.host = null;
      }
    }
    return host.used() + need <= host.limit();
  }

  /** Moves the output's bytes to the disk tier; false when there is none or the write failed. */
  private boolean writeFile(Output o, OutputSpace.Block block, byte[] bytes) {
    return disk != null && disk.write(o, block, bytes);
  }

  private void release(OutputSpace.Block b) {
    device.release(b.length());
    ((AccountedBlock) b).inner.close();
  }

  /**
   * Commits a map attempt's output: {@code block} (from {@link #allocate}) holds partition p at
   * {@code [offsets[p], offsets[p+1])} with {@code counts[p]} rows of the packed layout of
   * {@code widths}. Every section is checked against the block and the layout.
   */
  public synchronized void commit(int shuffleId, long mapAttemptId, OutputSpace.Block block, int[] widths,
      long[] offsets, long[] counts) {
    commit(shuffleId, mapAttemptId, block, widths, offsets, counts,
        block instanceof AccountedBlock a ? a.begun : Long.MAX_VALUE);
  }

  /** The count of removals so far, which a map task notes when it begins ({@link ShuffleRemovals}). */
  public long removalMark() {
    return removals.mark();
  }

  /**
   * {@link #commit(int, long, OutputSpace.Block, int[], long[], long[])} of a writer that began at
   * removal mark {@code begun} ({@link #removalMark}; the other form takes the block's allocation):
   * when its shuffle was removed since, the block is freed and nothing is stored.
   */
  public synchronized void commit(int shuffleId, long mapAttemptId, OutputSpace.Block block, int[] widths,
      long[] offsets, long[] counts, long begun) {
    ensureOpen();
    if (!(block instanceof AccountedBlock)) {
      throw new IllegalArgumentException("commit of a block that did not come from this store's allocate()");
    }
    int n = counts.length;
    if (offsets.length != n + 1 || offsets[0] != 0) {
      throw new IllegalArgumentException("map output " + shuffleId + "/" + mapAttemptId + ": " + offsets.length
          + " offsets starting at " + (offsets.length > 0 ? offsets[0] : -1) + " for " + n
          + " partitions, expected " + (n + 1) + " starting at 0");
    }
    for (int p = 0; p < n; p++) {
      long len = offsets[p + 1] - offsets[p];
      long expect = BatchLayout.packedBytes(counts[p], widths);
      if (len < expect || offsets[p + 1] > block.length()) {
        throw new IllegalArgumentException("map output " + shuffleId + "/" + mapAttemptId + ": partition " + p
            + " at [" + offsets[p] + ", " + offsets[p + 1] + ") with " + counts[p] + " rows, expected at least " + expect
            + " bytes within the block of " + block.length());
      }
    }
    if (removals.removedSince(shuffleId, begun)) {
      block.close(); // not among the outputs: returns its memory
      return;
    }
    Key k = new Key(shuffleId, mapAttemptId);
    Output old = outputs.remove(k);
    if (old != null) {
      drop(old);
    }
    Output o = new Output(k, widths.clone(), offsets.clone(), counts.clone(), block);
    outputs.put(k, o);
    arrived(o);
    notifyAll(); // committed: it can move now, which a waiting allocation may need
  }

  /**
   * Has {@code r} follow the outputs in device memory from now on ({@link DeviceResidency#arrived}
   * for each output there now), or nobody ({@code null}; the one before is told each output leaves).
   */
  public synchronized void follow(DeviceResidency r) {
    ensureOpen();
    if (residency != null) {
      for (Output o : outputs.values()) {
        leaving(o);
      }
    }
    residency = r;
    for (Output o : outputs.values()) {
      arrived(o);
    }
  }

  private void arrived(Output o) {
    if (residency != null && o.device != null && !o.removed && !o.followed) {
      residency.arrived(o.key.shuffleId(), o.key.mapAttemptId(), spaceBlock(o), o.offsets.clone(),
          o.counts.clone());
      o.followed = true;
    }
  }

  private void leaving(Output o) {
    if (o.followed) {
      o.followed = false;
      residency.leaving(o.key.shuffleId(), o.key.mapAttemptId());
    }
  }

  /** A committed output pinned on the device for a push; close it when the push is done. */
  public final class Pinned implements AutoCloseable {
    private final Output o;
    private boolean open = true;

    private Pinned(Output o) {
      this.o = o;
    }

    public OutputSpace.Block block() {
      return spaceBlock(o);
    }

    public int partitions() {
      return o.counts.length;
    }

    public long offset(int p) {
      return o.offsets[p];
    }

    public long bytes(int p) {
      return o.offsets[p + 1] - o.offsets[p];
    }

    public long rows(int p) {
      return o.counts[p];
    }

    public int[] widths() {
      return o.widths.clone();
    }

    /**
     * The checksum remembered for partition {@code p} with {@link #rememberChecksum}, or null: the
     * staging path computes a block's checksum over its served form once and keeps it with the output.
     */
    public Long checksum(int p) {
      synchronized (DeviceMapOutputStore.this) {
        return o.summed == null || !o.summed[p] ? null : o.checksums[p];
      }
    }

    public void rememberChecksum(int p, long value) {
      synchronized (DeviceMapOutputStore.this) {
        if (o.summed == null) {
          o.checksums = new long[o.counts.length];
          o.summed = new boolean[o.counts.length];
        }
        o.checksums[p] = value;
        o.summed[p] = true;
      }
    }

    @Override
    public void close() {
      synchronized (DeviceMapOutputStore.this) {
        if (open) {
          open = false;
          o.pins--;
          if (o.removed && o.pins == 0) {
            drop(o);
          }
          DeviceMapOutputStore.this.notifyAll(); // a push waiting for room (pin with a deadline)
        }
      }
    }
  }

  /**
   * Pins the output of {@code mapAttemptId} on the device (copying it back from host memory or its
   * spill file if it was spilled); throws {@link IllegalStateException} naming the output when it is not here.
   */
  public synchronized Pinned pin(int shuffleId, long mapAttemptId) {
    return pin(shuffleId, mapAttemptId, 0L);
  }

  /**
   * As {@link #pin(int, long)}, but while the device budget is held by outputs other pushes are
   * reading, waits for one of them to end until {@code deadline} ({@link System#nanoTime()}; 0: no
   * waiting), then throws as {@link #pin(int, long)} does. A push of a spilled output needs it back
   * in device memory, and pushes end within their deadlines.
   */
  public synchronized Pinned pin(int shuffleId, long mapAttemptId, long deadline) {
    ensureOpen();
    Output o = find(shuffleId, mapAttemptId);
    if (o.device == null) {
      awaitRoom(o.bytes(), deadline);
      o = find(shuffleId, mapAttemptId);
    }
    if (o.device == null) {
      makeRoom(o.bytes());
      OutputSpace.Block b = reserved(Math.max(16, o.bytes()));
      try {
        if (o.host != null) {
          b.write(0, o.host, 0, o.host.length);
        } else {
          DeviceSpillFolder.read(o, b);
        }
      } catch (RuntimeException e) {
        device.release(b.length());
        b.close();
        throw e;
      }
      o.device = new AccountedBlock(b);
      if (o.host != null) {
        host.release(o.host.length);
        o.host = null;
      } else {
        disk.drop(o);
      }
      restores++;
      arrived(o);
    }
    o.pins++;
    return new Pinned(o);
  }

  private Output find(int shuffleId, long mapAttemptId) {
    Output o = outputs.get(new Key(shuffleId, mapAttemptId));
    if (o == null) {
      throw new IllegalStateException("no device map output for shuffle " + shuffleId + " map attempt " + mapAttemptId
          + " on this executor");
    }
    return o;
  }

  /**
   * Pins partitions {@code [first, last]} of the output for a push. An output in device memory is
   * pinned whole, as {@link #pin(int, long, long)} does; of a spilled one only the span of those
   * partitions comes back, into a block of its own (counted in the device budget, freed when the
   * pin is closed), and the output stays where it is: a push needs its blocks, not the map task's
   * whole output, and a request whose outputs together exceed the budget is served all the same.
   * Waits for room until {@code deadline} as {@link #pin(int, long, long)} does.
   */
  public synchronized Pinned pin(int shuffleId, long mapAttemptId, int first, int last, long deadline) {
    ensureOpen();
    Output o = find(shuffleId, mapAttemptId);
    if (first < 0 || last < first || last >= o.counts.length) {
      throw new IllegalArgumentException("device map output " + shuffleId + "/" + mapAttemptId + ": partitions " + first
          + ".." + last + ", expected within 0.." + (o.counts.length - 1));
    }
    if (o.device != null) {
      o.pins++;
      return new Pinned(o);
    }
    long base = o.offsets[first] & ~255L; // the span keeps the output's 256-byte alignment
    long end = o.offsets[last + 1];
    long span = end - base;
    if (span > Integer.MAX_VALUE - 16) {
      throw new IllegalStateException("device map output " + shuffleId + "/" + mapAttemptId + ": partitions " + first
          + ".." + last + " span " + span + " bytes, more than one restore holds");
    }
    awaitRoom(span, deadline);
    o = find(shuffleId, mapAttemptId);
    if (o.device != null) { // brought back whole meanwhile
      o.pins++;
      return new Pinned(o);
    }
    makeRoom(span);
    OutputSpace.Block b = reserved(Math.max(16, span));
    try {
      byte[] bytes = new byte[(int) span];
      if (o.host != null) {
        System.arraycopy(o.host, (int) base, bytes, 0, bytes.length);
      } else {
        DeviceSpillFolder.readRange(o, base, bytes);
      }
      b.write(0, bytes, 0, bytes.length);
    } catch (RuntimeException e) {
      device.release(b.length());
      b.close();
      throw e;
    }
    long[] offsets = new long[o.offsets.length];
    long[] counts = new long[o.counts.length];
    for (int p = 0; p < offsets.length; p++) {
      offsets[p] = Math.min(span, Math.max(0, o.offsets[p] - base));
    }
    for (int p = first; p <= last; p++) {
      counts[p] = o.counts[p];
    }
    // Not one of the store's outputs: removed from the start, so closing its only pin frees it.
    Output part = new Output(o.key, o.widths, offsets, counts, new AccountedBlock(b));
    part.removed = true;
    part.pins = 1;
    part.span = true;
    spanBytes += b.length();
    restores++;
    return new Pinned(part);
  }

  /** The output's number of reduce partitions; throws {@link IllegalStateException} naming it when it is not here. */
  public synchronized int partitions(int shuffleId, long mapAttemptId) {
    ensureOpen();
    return find(shuffleId, mapAttemptId).counts.length;
  }

  /** Waits (on the store's lock) until {@link #roomFor} {@code bytes} or {@code deadline} passed; 0: returns at once. */
  private void awaitRoom(long bytes, long deadline) {
    while (deadline != 0 && bytes <= device.limit() && !roomFor(bytes)) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return;
      }
      try {
        wait(Math.max(1, left / 1_000_000));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
      ensureOpen();
    }
  }

  /**
   * Device bytes pinned now (outputs readers hold views of or pushes read, and the spans pushes
   * brought back): what the budget cannot move.
   */
  public synchronized long pinnedBytes() {
    return deviceBytes(true) + spanBytes;
  }

  /** Device bytes of the outputs in device memory that are pinned ({@code true}) or not. */
  private long deviceBytes(boolean pinned) {
    long n = 0;
    for (Output o : outputs.values()) {
      if (o.device != null && (o.pins > 0) == pinned) {
        n += o.device.length();
      }
    }
    return n;
  }

  /** The device budget ({@code spark.slipstream.gpu.mapOutput.memoryBytes}). */
  public long deviceBudget() {
    return device.limit();
  }

  /** Whether {@code bytes} more fit the device budget once every unpinned output that can move has moved. */
  private boolean roomFor(long bytes) {
    return device.used() - deviceBytes(false) + bytes <= device.limit();
  }

  /**
   * Pins the output on the device if it is there now, else returns null without moving anything:
   * a reader on this executor then takes the partitions it needs with {@link #readPartition}
   * rather than bringing the whole output back into the device budget for the length of its task.
   */
  public synchronized Pinned pinIfOnDevice(int shuffleId, long mapAttemptId) {
    ensureOpen();
    Output o = find(shuffleId, mapAttemptId);
    if (o.device == null) {
      return null;
    }
    o.pins++;
    return new Pinned(o);
  }

  /** One partition of a map output, copied out of the store: its bytes in the packed layout and its rows. */
  public record PartitionCopy(byte[] bytes, long rows, int[] widths) {}

  /**
   * Copies partition {@code p} of the output from wherever it is (device memory, host memory or its
   * spill file), moving nothing; throws {@link IllegalStateException} naming the output when it is
   * not here or the partition is out of range.
   */
  public synchronized PartitionCopy readPartition(int shuffleId, long mapAttemptId, int p) {
    ensureOpen();
    Output o = find(shuffleId, mapAttemptId);
    if (p < 0 || p >= o.counts.length) {
      throw new IllegalStateException("device map output " + shuffleId + "/" + mapAttemptId + ": partition " + p
          + ", expected 0.." + (o.counts.length - 1));
    }
    long at = o.offsets[p];
    long len = o.offsets[p + 1] - at;
    if (len > Integer.MAX_VALUE - 16) {
      throw new IllegalStateException("device map output " + shuffleId + "/" + mapAttemptId + ": partition " + p
          + " has " + len + " bytes, more than one copy out of the store holds");
    }
    byte[] out = new byte[(int) len];
    if (o.device != null) {
      o.device.read(at, out, 0, out.length);
    } else if (o.host != null) {
      System.arraycopy(o.host, (int) at, out, 0, out.length);
    } else {
      DeviceSpillFolder.readRange(o, at, out);
    }
    return new PartitionCopy(out, o.counts[p], o.widths.clone());
  }

  /** Whether the map output is here and in device memory (pinning it copies nothing back from host memory). */
  public synchronized boolean onDevice(int shuffleId, long mapAttemptId) {
    Output o = outputs.get(new Key(shuffleId, mapAttemptId));
    return o != null && o.device != null;
  }

  public synchronized boolean contains(int shuffleId, long mapAttemptId) {
    return outputs.containsKey(new Key(shuffleId, mapAttemptId));
  }

  /** Frees one map attempt's output (a failed task); deferred while a push still reads it. */
  public synchronized boolean removeMapOutput(int shuffleId, long mapAttemptId) {
    Output o = outputs.remove(new Key(shuffleId, mapAttemptId));
    if (o == null) {
      return false;
    }
    leaving(o); // no longer served from the device, even while a push still reads it
    o.removed = true;
    if (o.pins == 0) {
      drop(o);
    }
    return true;
  }

  /** Frees every output of {@code shuffleId}; an output a push still reads goes when the push ends. */
  public synchronized int removeShuffle(int shuffleId) {
    removals.removed(shuffleId);
    List<Output> gone = new ArrayList<>();
    outputs.values().removeIf(o -> {
      if (o.key.shuffleId() == shuffleId) {
        gone.add(o);
        return true;
      }
      return false;
    });
    for (Output o : gone) {
      leaving(o);
      o.removed = true;
      if (o.pins == 0) {
        drop(o);
      }
    }
    return gone.size();
  }

  private void drop(Output o) {
    notifyAll(); // device bytes or pins may go: a push waiting for room looks again
    if (o.device != null) {
      leaving(o);
      if (o.span) {
        spanBytes -= o.device.length();
      }
      release(o.device);
      o.device = null;
    }
    if (o.host != null) {
      host.release(o.host.length);
      o.host = null;
    }
    if (o.file != null) {
      disk.drop(o);
    }
  }

  public long deviceInUse() {
    return device.used();
  }

  public long hostInUse() {
    return host.used();
  }

  public synchronized long spills() {
    return spills;
  }

  /** Bytes of outputs now in spill files. */
  public synchronized long diskInUse() {
    return disk == null ? 0 : disk.bytes();
  }

  /** Outputs written to spill files so far (from the device or from host memory). */
  public synchronized long diskSpills() {
    return disk == null ? 0 : disk.spills();
  }

  public synchronized long restores() {
    return restores;
  }

  public synchronized int outputCount() {
    return outputs.size();
  }

  private void ensureOpen() {
    if (closed) {
      throw new IllegalStateException("device map-output store is closed");
    }
  }

  /** Frees every output; throws if a push still held one (its memory is freed regardless). */
  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    notifyAll();
    int pinned = 0;
    for (Output o : outputs.values()) {
      pinned += o.pins;
      o.pins = 0;
      drop(o);
    }
    outputs.clear();
    space.close();
    if (ownedPools != null) {
      ownedPools.close(); // fails loudly if an uncommitted block was never closed
    }
    if (pinned > 0) {
      throw new IllegalStateException("device map-output store closed while " + pinned + " push(es) still held outputs");
    }
  }

  /**
   * The space's own block of an output in device memory (a slab block names its registered region),
   * not the accounting wrapper it is kept in.
   */
  private static OutputSpace.Block spaceBlock(Output o) {
    return ((AccountedBlock) o.device).inner;
  }

  /** A block counted against the device budget; closing an uncommitted one returns its bytes. */
  private final class AccountedBlock implements OutputSpace.Block {
    final OutputSpace.Block inner;
    /** The store's removal mark when the block was allocated. */
    final long begun;
    private boolean open = true;

    AccountedBlock(OutputSpace.Block inner) {
      this.inner = inner;
      this.begun = removals.mark();
    }

    @Override
    public long length() {
      return inner.length();
    }

    @Override
    public long address() {
      return inner.address();
    }

    @Override
    public void write(long offset, byte[] src, int off, int len) {
      inner.write(offset, src, off, len);
    }

    @Override
    public void read(long offset, byte[] dst, int off, int len) {
      inner.read(offset, dst, off, len);
    }

    @Override
    public void read(long offset, java.nio.ByteBuffer dst) {
      inner.read(offset, dst);
    }

    /** For an uncommitted block (a failed map task): returns its memory. Committed blocks are the store's. */
    @Override
    public void close() {
      synchronized (DeviceMapOutputStore.this) {
        if (!open) {
          return;
        }
        for (Output o : outputs.values()) {
          if (o.device == this) {
            return; // committed: the store frees it
          }
        }
        open = false;
        device.release(inner.length());
        inner.close();
        DeviceMapOutputStore.this.notifyAll();
      }
    }
  }
}
