package dev.slipstream.core.shuffle;

import dev.slipstream.core.memory.DirectMemory;
import dev.slipstream.core.memory.MemoryPool;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An executor's map output: registered off-heap pages within a budget, local files beyond it.
 *
 * <p>Memory is allocated in segments that are registered with the transport once and then
 * reused; a segment is cut into pages and a map output holds whole pages. When no page is free
 * and the budget allows no new segment, the output being written spills to a local file.
 *
 * <p>Threading: thread-safe. Ownership: the store owns its segments, pages and files;
 * {@link #removeShuffle} frees a shuffle's outputs once no reader retains them;
 * {@link #close()} deregisters every segment and deletes every file.
 */
public final class MapOutputStore implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(MapOutputStore.class);

  /** A page of a registered segment. */
  static final class Page {
    final ByteBuffer memory;

    Page(ByteBuffer memory) {
      this.memory = memory;
    }

    ByteBuffer view() {
      return memory.duplicate().clear();
    }
  }

  private final Transport transport;
  private final MemoryPool pool;
  private final long segmentBytes;
  private final long pageBytes;
  private final DirectMemory memory;
  private final Path spillDir;
  private final ChecksumAlgorithm checksum;
  private final List<RegisteredRegion> segments = new ArrayList<>();
  private final ArrayDeque<Page> freePages = new ArrayDeque<>();
  private final Map<Integer, Map<Long, MapOutput>> outputs = new ConcurrentHashMap<>();
  /** Which shuffles were removed when: an output of a task begun before its shuffle's removal is dropped. */
  private final ShuffleRemovals removals = new ShuffleRemovals();
  private final AtomicLong spills = new AtomicLong();
  private final AtomicLong spilledBytes = new AtomicLong();
  private final AtomicLong fileSeq = new AtomicLong();
  private final AtomicLong evictions = new AtomicLong();
  /** Committed outputs holding pages, oldest first: the order in which pressure moves them to disk. */
  private final java.util.concurrent.ConcurrentLinkedDeque<MapOutput> resident =
      new java.util.concurrent.ConcurrentLinkedDeque<>();
  private long pagesInUse;
  private boolean closed;

  /**
   * @param pool accounts the segments; its limit is the memory budget
   * @param spillDir folder for outputs beyond the budget (created if missing)
   */
  public MapOutputStore(Transport transport, MemoryPool pool, long segmentBytes, long pageBytes, Path spillDir) {
    this(transport, pool, segmentBytes, pageBytes, spillDir, ChecksumAlgorithm.CRC32C);
  }

  /** @param checksum the per-block checksum computed as map output is written */
  public MapOutputStore(Transport transport, MemoryPool pool, long segmentBytes, long pageBytes, Path spillDir,
                        ChecksumAlgorithm checksum) {
    this(transport, pool, segmentBytes, pageBytes, spillDir, checksum, DirectMemory.JDK);
  }

  /** @param memory where segments come from */
  public MapOutputStore(Transport transport, MemoryPool pool, long segmentBytes, long pageBytes, Path spillDir,
                        ChecksumAlgorithm checksum, DirectMemory memory) {
    this.memory = memory;
    this.checksum = checksum;
    this.transport = transport;
    this.pool = pool;
    this.segmentBytes = segmentBytes;
    this.pageBytes = pageBytes;
    this.spillDir = spillDir;
  }

  public long pageBytes() {
    return pageBytes;
  }

  public ChecksumAlgorithm checksumAlgorithm() {
    return checksum;
  }

  /** Starts the output of one map task attempt. */
  public MapOutputWriter newOutput(int shuffleId, long mapId, int numPartitions) {
    return newOutput(shuffleId, mapId, numPartitions, removalMark());
  }

  /**
   * Starts the output of one map task attempt that began at removal mark {@code begun}
   * ({@link #removalMark}, taken when the task began): if its shuffle is removed after that, the
   * output is dropped when it commits.
   */
  public MapOutputWriter newOutput(int shuffleId, long mapId, int numPartitions, long begun) {
    return new MapOutputWriter(this, shuffleId, mapId, numPartitions, begun);
  }

  /** Starts the output of one map task attempt with every partition writable at once. */
  public PartitionedOutputWriter newPartitionedOutput(int shuffleId, long mapId, int numPartitions) {
    return newPartitionedOutput(shuffleId, mapId, numPartitions, removalMark());
  }

  /** {@link #newPartitionedOutput(int, long, int)} of a task that began at removal mark {@code begun}. */
  public PartitionedOutputWriter newPartitionedOutput(int shuffleId, long mapId, int numPartitions, long begun) {
    return new PartitionedOutputWriter(this, shuffleId, mapId, numPartitions, begun);
  }

  /**
   * A free page; when the budget is spent, first moves the oldest committed outputs that no
   * reader holds to local files. Null when nothing can be freed.
   */
  Page allocatePage() {
    Page p = tryAllocatePage();
    while (p == null && evictOldest()) {
      p = tryAllocatePage();
    }
    return p;
  }

  /** Moves the oldest resident output nobody is reading to a file; false when there is none. */
  private boolean evictOldest() {
    for (MapOutput o : resident) {
      try {
        long moved = o.evictToFile();
        if (moved >= 0) {
          resident.remove(o);
          evictions.incrementAndGet();
          onSpill(moved);
          return true;
        }
      } catch (IOException e) {
        LOG.warn("Could not move map output {}/{} to disk: {}", o.shuffleId(), o.mapId(), e.toString());
        return false;
      }
    }
    return false;
  }

  /** A free page without moving any output to disk; null when the budget is spent. */
  synchronized Page tryAllocatePage() {
    if (closed) {
      throw new IllegalStateException("map-output store is closed");
    }
    if (freePages.isEmpty() && !growSegment()) {
      return null;
    }
    pagesInUse++;
    return freePages.pop();
  }

  private boolean growSegment() {
    if (!pool.tryReserve(segmentBytes)) {
      return false;
    }
    ByteBuffer seg;
    RegisteredRegion region;
    try {
      seg = memory.allocate((int) segmentBytes);
      region = transport.register(seg);
    } catch (TransportException | OutOfMemoryError e) {
      pool.release(segmentBytes);
      LOG.warn("Could not add a {} byte map-output segment; spilling instead: {}", segmentBytes, e.toString());
      return false;
    }
    segments.add(region);
    ByteBuffer view = region.buffer();
    for (long off = 0; off + pageBytes <= segmentBytes; off += pageBytes) {
      view.limit((int) (off + pageBytes)).position((int) off);
      freePages.add(new Page(view.slice()));
      view.clear();
    }
    return true;
  }

  synchronized void freePages(List<Page> pages) {
    pagesInUse -= pages.size();
    if (!closed) {
      freePages.addAll(pages);
    }
  }

  /** The folder spilled outputs go to. */
  Path spillDir() {
    return spillDir;
  }

  Path newSpillFile(int shuffleId, long mapId) throws IOException {
    Files.createDirectories(spillDir);
    return spillDir.resolve("slipstream_" + shuffleId + "_" + mapId + "_" + fileSeq.incrementAndGet() + ".data");
  }

  void onSpill(long bytes) {
    spills.incrementAndGet();
    spilledBytes.addAndGet(bytes);
  }

  void logDeleteFailure(Path file, IOException e) {
    LOG.warn("Could not delete map-output file {}: {}", file, e.toString());
  }

  /** The count of removals so far, which a map task notes when it begins ({@link ShuffleRemovals}). */
  public long removalMark() {
    return removals.mark();
  }

  /**
   * Publishes a committed output; an earlier output of the same attempt id is replaced. An output
   * whose task began (at removal mark {@code begun}) before its shuffle was removed is released
   * instead (see {@link ShuffleRemovals}).
   */
  void publish(MapOutput out, long begun) {
    MapOutput[] old = new MapOutput[1];
    boolean[] kept = new boolean[1];
    // Atomic with removeShuffle for the same shuffle: an output is either published before the removal
    // (and freed by it) or refused after it.
    outputs.compute(out.shuffleId(), (id, m) -> {
      if (removals.removedSince(id, begun)) {
        return m;
      }
      Map<Long, MapOutput> into = m != null ? m : new ConcurrentHashMap<>();
      synchronized (into) {
        if (out.inMemory()) {
          resident.add(out);
        }
        old[0] = into.put(out.mapId(), out);
      }
      kept[0] = true;
      return into;
    });
    if (!kept[0]) {
      LOG.debug("Dropped map output {}/{}: its shuffle was removed while the map task wrote it",
          out.shuffleId(), out.mapId());
      out.release();
      return;
    }
    if (old[0] != null) {
      resident.remove(old[0]);
      old[0].release();
    }
  }

  /** The committed output of a map attempt, retained for the caller, or null. */
  public MapOutput retain(int shuffleId, long mapId) {
    Map<Long, MapOutput> m = outputs.get(shuffleId);
    if (m == null) {
      return null;
    }
    synchronized (m) {
      MapOutput o = m.get(mapId);
      if (o != null) {
        o.retain();
      }
      return o;
    }
  }

  /** Whether the output of a map attempt is here and in registered pages (a snapshot). */
  boolean isInMemory(int shuffleId, long mapId) {
    Map<Long, MapOutput> m = outputs.get(shuffleId);
    MapOutput o = m == null ? null : m.get(mapId);
    return o != null && o.inMemory();
  }

  /** Frees one map attempt's output (a failed task's), once no reader retains it. */
  public void removeMapOutput(int shuffleId, long mapId) {
    Map<Long, MapOutput> m = outputs.get(shuffleId);
    if (m != null) {
      MapOutput o;
      synchronized (m) {
        o = m.remove(mapId);
      }
      if (o != null) {
        resident.remove(o);
        o.release();
      }
    }
  }

  /**
   * Frees every output of a shuffle (pages go back to the free list once no reader holds them); an
   * output of it whose task began before this is dropped when it commits.
   */
  public void removeShuffle(int shuffleId) {
    @SuppressWarnings("unchecked")
    Map<Long, MapOutput>[] gone = new Map[1];
    outputs.compute(shuffleId, (id, m) -> {
      removals.removed(id);
      gone[0] = m;
      return null;
    });
    Map<Long, MapOutput> m = gone[0];
    if (m != null) {
      synchronized (m) {
        m.values().forEach(o -> {
          resident.remove(o);
          o.release();
        });
        m.clear();
      }
    }
  }

  public int outputCount() {
    return outputs.values().stream().mapToInt(Map::size).sum();
  }

  public synchronized long memoryInUse() {
    return pagesInUse * pageBytes;
  }

  public synchronized long memoryRegistered() {
    return segments.size() * segmentBytes;
  }

  /** Committed outputs moved from memory to disk to make room for newer ones. */
  public long evictions() {
    return evictions.get();
  }

  public long spills() {
    return spills.get();
  }

  public long spilledBytes() {
    return spilledBytes.get();
  }

  /** Number of spill files currently on disk. */
  public long spillFilesOnDisk() throws IOException {
    if (!Files.isDirectory(spillDir)) {
      return 0;
    }
    try (var s = Files.list(spillDir)) {
      return s.filter(p -> p.getFileName().toString().startsWith("slipstream_")).count();
    }
  }

  @Override
  public void close() {
    List<Integer> ids = new ArrayList<>(outputs.keySet());
    ids.forEach(this::removeShuffle);
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      if (pagesInUse != 0) {
        LOG.warn("Closing the map-output store with {} pages still retained by readers", pagesInUse);
      }
      segments.forEach(RegisteredRegion::close);
      pool.release(segments.size() * segmentBytes);
      segments.clear();
      freePages.clear();
    }
  }
}
