package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Fetches one reduce task's remote blocks by pull-driven writes: it reserves landing space,
 * asks each holder to write a batch of blocks into it, and hands out each block once the
 * holder's signal says all its bytes are there. A block may be a batch block (adjacent
 * partitions of one map output, {@link BlockId#isBatch()}): it is asked for as one entry and
 * handed out as one block, and each of its partitions is verified against its own checksum.
 *
 * <p>Limits: at most {@code maxBytesInFlight} landing bytes requested or held unconsumed; one
 * request asks for at most {@code maxRequestBytes}. Blocks larger than that arrive in chunks
 * of that size, streamed in order (the next chunk is prefetched while one is read), after all
 * smaller blocks; so a single record larger than any landing range still gets through.
 *
 * <p>Threading: one task thread calls {@link #hasNext}, {@link #next}, {@link #take},
 * {@link #poll} and {@link #close}. Each block returned by {@code next} is valid until the next
 * call to {@code next} or {@code close}, which close its stream; the caller of {@code take} and
 * {@code poll} owns and closes the block. Every wait has the fetch deadline.
 */
public final class BlockFetcher implements Iterator<FetchedBlock>, AutoCloseable {

  /** A block to fetch and its size from the map status (for a batch block, its partitions' sizes added up). */
  public record RemoteBlock(BlockId id, long size) {
    public RemoteBlock {
      if (id.partitions() > ShuffleMessages.MAX_TABLE_RECORDS) {
        throw new IllegalArgumentException("block " + id + " covers " + id.partitions() + " partitions, more than the "
            + ShuffleMessages.MAX_TABLE_RECORDS + " one write request can ask for");
      }
    }
  }

  /** The blocks one holder has for this task. */
  public record HolderPlan(String holderId, EndpointDescriptor endpoint, List<RemoteBlock> blocks) {}

  private static final int MAX_BLOCKS_PER_REQUEST = 1024;

  private final class Req {
    final HolderPlan holder;
    final List<RemoteBlock> blocks;
    final long bytes;
    /** Block-table records: one per partition of each block. */
    final int records;
    LandingPool.Range range;
    PendingRequest pending;
    int unconsumed;
    boolean retry;

    Req(HolderPlan holder, List<RemoteBlock> blocks, long bytes) {
      this.holder = holder;
      this.blocks = blocks;
      this.bytes = bytes;
      int n = 0;
      for (RemoteBlock b : blocks) {
        n += b.id().partitions();
      }
      this.records = n;
    }

    void consumedOne() {
      if (--unconsumed == 0) {
        release();
      }
    }

    /** Frees the range; its request is revoked (completed, failed or cancelled) by now. */
    void release() {
      reserved -= range.length();
      range.free();
    }
  }

  private final class LandedBlock implements FetchedBlock {
    final Req req;
    final RemoteBlock block;
    final long size;
    final InputStream stream;
    final java.nio.ByteBuffer view;

    /**
     * @param landed bytes of the block that landed at {@code at}
     * @param available bytes the block really has; beyond {@code landed} they are streamed
     */
    LandedBlock(Req req, RemoteBlock block, long at, long landed, long available, PartitionCheck check) {
      this.req = req;
      this.block = block;
      this.size = available;
      java.nio.ByteBuffer bytes = req.range.view(at, landed);
      this.view = available > landed ? null : bytes.asReadOnlyBuffer(); // a position of its own
      InputStream head = new ByteBuffersInputStream(List.of(bytes), req::consumedOne);
      if (available > landed) {
        // The block is longer than its map status said: the rest streams in chunks, and each
        // partition's checksum is checked when the reader reaches that partition's end.
        InputStream whole = new java.io.SequenceInputStream(head, new StreamedBlock(BlockFetcher.this, req.holder, block, landed, available)) {
          @Override
          public void close() throws IOException {
            super.close(); // closes every remaining stream of the sequence
            head.close();
          }
        };
        this.stream = check == null ? whole : new PartitionCheck.VerifyingStream(whole, check);
      } else {
        this.stream = head;
      }
    }

    @Override public BlockId id() { return block.id(); }
    @Override public String holderId() { return req.holder.holderId(); }
    @Override public long size() { return size; }
    @Override public InputStream stream() { return stream; }
    @Override public java.nio.ByteBuffer landedView() { return view == null ? null : view.duplicate(); }
  }

  private final ShuffleNode node;
  private final int shuffleId;
  private final long maxBytesInFlight;
  private final long maxRequestBytes;
  private final long timeoutNanos;
  private final FetchMetrics metrics;
  private final ChecksumAlgorithm checksum;
  private final ArrayDeque<Req> toIssue = new ArrayDeque<>();
  private final Set<Req> inFlight = new HashSet<>();
  private final LinkedBlockingQueue<Req> completed = new LinkedBlockingQueue<>();
  private final ArrayDeque<LandedBlock> ready = new ArrayDeque<>();
  private final ArrayDeque<StreamedBlock> large = new ArrayDeque<>();
  private long reserved;
  private int requestsSent;
  private int remaining;
  private FetchedBlock current;
  private boolean closed;

  BlockFetcher(ShuffleNode node, int shuffleId, List<HolderPlan> plan, long maxBytesInFlight, long maxRequestBytes,
               FetchMetrics metrics) {
    this.node = node;
    this.shuffleId = shuffleId;
    this.maxBytesInFlight = maxBytesInFlight;
    this.maxRequestBytes = maxRequestBytes;
    this.timeoutNanos = node.config().fetchTimeout().toNanos();
    this.metrics = metrics;
    this.checksum = node.config().checksum();
    planRequests(plan);
  }

  /** Batches each holder's small blocks into requests and interleaves holders. */
  private void planRequests(List<HolderPlan> plan) {
    List<ArrayDeque<Req>> perHolder = new ArrayList<>();
    for (HolderPlan h : plan) {
      ArrayDeque<Req> reqs = new ArrayDeque<>();
      List<RemoteBlock> batch = new ArrayList<>();
      long batchBytes = 0;
      int batchRecords = 0;
      for (RemoteBlock b : h.blocks()) {
        if (b.size() <= 0) {
          continue;
        }
        remaining++;
        if (b.size() > maxRequestBytes) {
          large.add(new StreamedBlock(this, h, b, 0, -1));
          continue;
        }
        int records = b.id().partitions();
        if (batchBytes + b.size() > maxRequestBytes || batch.size() == MAX_BLOCKS_PER_REQUEST
            || batchRecords + records > ShuffleMessages.MAX_TABLE_RECORDS) {
          reqs.add(new Req(h, batch, batchBytes));
          batch = new ArrayList<>();
          batchBytes = 0;
          batchRecords = 0;
        }
        batch.add(b);
        batchBytes += b.size();
        batchRecords += records;
      }
      if (!batch.isEmpty()) {
        reqs.add(new Req(h, batch, batchBytes));
      }
      perHolder.add(reqs);
    }
    boolean any = true;
    while (any) {
      any = false;
      for (ArrayDeque<Req> q : perHolder) {
        Req r = q.poll();
        if (r != null) {
          toIssue.add(r);
          any = true;
        }
      }
    }
  }

  ShuffleNode node() { return node; }
  int shuffleId() { return shuffleId; }
  long maxRequestBytes() { return maxRequestBytes; }
  long timeoutNanos() { return timeoutNanos; }
  FetchMetrics metrics() { return metrics; }
  ChecksumAlgorithm checksum() { return checksum; }

  /** Counts a request a streamed block sent. */
  void requestSent() {
    requestsSent++;
  }

  static long align8(long bytes) {
    return (bytes + 7) & ~7L;
  }

  /** Landing bytes for a request: data capacity, then the block table's records, then the signal. */
  static long landingNeed(long capacity, int records) {
    return align8(capacity) + BlockTable.bytes(records) + 8;
  }

  private void issue() throws BlockFetchException {
    issue(true);
  }

  /** Sends requests while the in-flight limit allows; without {@code mayWait}, never waits for landing space. */
  private void issue(boolean mayWait) throws BlockFetchException {
    while (!toIssue.isEmpty()) {
      Req r = toIssue.peek();
      long need = landingNeed(r.bytes, r.records);
      if (reserved > 0 && reserved + need > maxBytesInFlight) {
        return;
      }
      LandingPool.Range range = node.landing().tryAllocate(need);
      if (range == null) {
        if (reserved > 0 || !mayWait) {
          return; // our own landed blocks free space as they are consumed
        }
        range = allocateWaiting(need, r.blocks.get(0).id(), r.holder.holderId());
      }
      toIssue.poll();
      r.range = range;
      reserved += range.length();
      List<ShuffleMessages.Entry> entries = new ArrayList<>(r.blocks.size());
      long at = 0;
      for (RemoteBlock b : r.blocks) {
        entries.add(new ShuffleMessages.Entry(b.id().mapId(), b.id().partition(), b.id().endPartition(), 0, b.size(),
            at));
        at += b.size();
      }
      long lengths = align8(r.bytes);
      r.pending = node.send(r.holder.endpoint(), shuffleId, range, entries, lengths,
          lengths + BlockTable.bytes(r.records));
      inFlight.add(r);
      requestsSent++;
      r.pending.done.whenComplete((v, e) -> completed.add(r));
    }
  }

  LandingPool.Range allocateWaiting(long need, BlockId block, String holderId) throws BlockFetchException {
    long t0 = System.nanoTime();
    try {
      LandingPool.Range range = node.landing().allocate(need, timeoutNanos);
      if (range == null) {
        throw new BlockFetchException(block, holderId, "no landing space for " + need + " bytes within "
            + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + " ms (landing pool " + node.landing().capacity()
            + " bytes, " + node.landing().used() + " in use)", null);
      }
      return range;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new BlockFetchException(block, holderId, "interrupted while waiting for landing space", e);
    } finally {
      metrics.fetchWaitNanos(System.nanoTime() - t0);
    }
  }

  /**
   * Sends the first requests, as many as the in-flight limit allows, so that holders write
   * while the caller does other work (a reduce task reads its local blocks meanwhile).
   * Optional: {@link #next()} issues whatever is not yet issued.
   *
   * @throws FetchFailure when no landing space frees up within the deadline
   */
  public void start() {
    if (closed) {
      return;
    }
    try {
      issue();
    } catch (BlockFetchException e) {
      throw new FetchFailure(e);
    }
  }

  /** Write requests sent so far, each chunk of a streamed block counted. */
  public int requestsSent() {
    return requestsSent;
  }

  @Override
  public boolean hasNext() {
    return remaining > 0 && !closed;
  }

  /**
   * The next fetched block, in completion order.
   *
   * @throws BlockFetchException (unchecked wrapper {@link FetchFailure}) when a holder failed,
   *     was lost or missed the deadline
   */
  @Override
  public FetchedBlock next() {
    try {
      return nextBlock();
    } catch (BlockFetchException e) {
      throw new FetchFailure(e);
    }
  }

  /**
   * Like {@link #next()}, but the caller owns the block: its stream stays valid across later calls
   * until the caller closes it, which must be on this fetcher's thread; {@link #close()} does not
   * close it. A block whose {@link FetchedBlock#landedView()} is not null may be read by another
   * thread meanwhile (its bytes no longer change); any other block's stream fetches more as it is
   * read and must be read on this fetcher's thread.
   */
  public FetchedBlock take() {
    FetchedBlock b = next();
    current = null;
    return b;
  }

  /**
   * A block the caller owns, as {@link #take()}, when one has landed already: lands the requests
   * that completed, sends more where landing space is free, and returns the first landed block,
   * or null; never waits.
   *
   * @throws FetchFailure when a completed request failed or its table is forged
   */
  public FetchedBlock poll() {
    if (closed || remaining == 0) {
      return null;
    }
    try {
      Req r;
      while (ready.isEmpty() && (r = completed.poll()) != null) {
        land(r);
      }
      issue(false); // space freed by blocks consumed since
    } catch (BlockFetchException e) {
      throw new FetchFailure(e);
    }
    LandedBlock b = ready.poll();
    if (b != null) {
      remaining--;
    }
    return b;
  }

  /** Unchecked carrier of a {@link BlockFetchException} out of {@link Iterator#next()}. */
  public static final class FetchFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    FetchFailure(BlockFetchException cause) {
      super(cause.getMessage(), cause);
    }

    @Override
    public synchronized BlockFetchException getCause() {
      return (BlockFetchException) super.getCause();
    }
  }

  private FetchedBlock nextBlock() throws BlockFetchException {
    closeCurrent();
    if (!hasNext()) {
      throw new NoSuchElementException("no more blocks");
    }
    while (true) {
      LandedBlock b = ready.poll();
      if (b != null) {
        remaining--;
        current = b;
        return b;
      }
      if (!toIssue.isEmpty() || !inFlight.isEmpty()) {
        issue();
        Req r;
        long t0 = System.nanoTime();
        try {
          // The node fails a request at its deadline; the extra second is only a backstop.
          r = completed.poll(timeoutNanos + TimeUnit.SECONDS.toNanos(1), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new BlockFetchException(firstPending(), "?", "interrupted while waiting", e);
        } finally {
          metrics.fetchWaitNanos(System.nanoTime() - t0);
        }
        if (r == null) {
          throw new BlockFetchException(firstPending(), "?", "no request completed within the deadline", null);
        }
        land(r);
        continue;
      }
      StreamedBlock s = large.poll();
      if (s != null) {
        remaining--;
        current = s;
        return s;
      }
      throw new IllegalStateException("fetcher has " + remaining + " blocks left but nothing to fetch");
    }
  }

  private BlockId firstPending() {
    Req r = inFlight.isEmpty() ? toIssue.peek() : inFlight.iterator().next();
    return r == null ? new BlockId(shuffleId, -1, -1) : r.blocks.get(0).id();
  }

  /**
   * Hands out the blocks of a completed request. Its registration is revoked by now, so the bytes
   * and the holder's table can no longer change. The table is checked first and the checksums of
   * whole blocks next; a failure of either hands out nothing and frees the range.
   */
  private void land(Req r) throws BlockFetchException {
    inFlight.remove(r);
    try {
      r.pending.done.getNow(null);
    } catch (RuntimeException e) {
      Throwable cause = e.getCause() != null ? e.getCause() : e;
      r.release();
      throw new BlockFetchException(r.blocks.get(0).id(), r.holder.holderId(), cause.getMessage(), cause);
    }
    int n = r.blocks.size();
    BlockTableRecords t;
    try {
      t = BlockTableRecords.read(r.range, align8(r.bytes), r.blocks, r.holder, r.pending.requestId,
          r.pending.signalled);
    } catch (BlockFetchException e) {
      r.release();
      throw e;
    }
    long[] available = t.available();
    long[][] lengths = t.lengths();
    long[][] expected = t.expected();
    List<LandedBlock> out = new ArrayList<>(n);
    List<RemoteBlock> refetch = new ArrayList<>(0);
    long at = 0;
    for (int i = 0; i < n; i++) {
      RemoteBlock b = r.blocks.get(i);
      long landed = Math.min(available[i], b.size());
      metrics.remoteBlockFetched(landed);
      node.onBytesFetched(landed);
      boolean whole = available[i] == landed;
      if (checksum != ChecksumAlgorithm.NONE && whole) {
        // Landed whole from offset 0: the records are the partitions' full lengths.
        String mismatch = BlockTableRecords.mismatch(checksum, r.range, at, b.id(), lengths[i], expected[i]);
        if (mismatch != null) {
          if (r.retry) {
            r.release();
            throw new BlockFetchException(b.id(), r.holder.holderId(), "checksum mismatch again after a refetch ("
                + mismatch + ")", new TransportException(TransportError.CHECKSUM_MISMATCH, "block " + b.id()
                + " is corrupt at its holder"));
          }
          refetch.add(b); // this block's share of the range is not handed out
          at += b.size();
          continue;
        }
      }
      out.add(new LandedBlock(r, b, at, landed, available[i], checksum == ChecksumAlgorithm.NONE || whole ? null
          : new PartitionCheck(checksum, b.id(), r.holder.holderId(), lengths[i], expected[i])));
      at += b.size();
    }
    r.unconsumed = out.size();
    if (out.isEmpty()) {
      r.release();
    }
    ready.addAll(out);
    for (RemoteBlock b : refetch) {
      node.onChecksumRetry();
      Req again = new Req(r.holder, List.of(b), b.size());
      again.retry = true;
      toIssue.addFirst(again);
    }
  }

  private void closeCurrent() {
    if (current != null) {
      try {
        current.stream().close();
      } catch (IOException e) {
        // ByteBuffersInputStream and StreamedBlock streams do not throw on close
      }
      current = null;
    }
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    closeCurrent();
    for (LandedBlock b : ready) {
      try {
        b.stream().close();
      } catch (IOException e) {
        // cannot happen, see closeCurrent
      }
    }
    ready.clear();
    for (Req q : inFlight) {
      node.cancel(q.pending, "its reduce task closed the fetch"); // revoked: no late write can land
      q.release();
    }
    inFlight.clear();
    completed.clear();
    toIssue.clear();
    large.clear();
  }
}
