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
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

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
 * <p>Threading: one task thread calls {@link #hasNext}, {@link #next} and {@link #close}. Each
 * block returned by {@code next} is valid until the next call to {@code next} or {@code close},
 * which close its stream. Every wait has the fetch deadline.
 */
public final class BlockFetcher implements Iterator<BlockFetcher.FetchedBlock>, AutoCloseable {

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

  /** A fetched block; its stream is valid until the next {@code next()} or {@code close()}. */
  public interface FetchedBlock {
    BlockId id();

    String holderId();

    /** The size the map status gave, or the real one where it was known when the block was handed out. */
    long size();

    /**
     * The block's real length in bytes, as its holder reported it: for a block streamed in chunks,
     * known once its first chunk has landed (fetched now, with the fetch deadline, if not yet).
     */
    default long exactSize() throws IOException {
      return size();
    }

    InputStream stream();

    /**
     * The whole block as a read-only view of the landing region when it landed in one request
     * (checked against its checksum when checksums are on), else null. Valid as long as the block's
     * stream; reading it consumes nothing: close the stream to release the space.
     */
    default java.nio.ByteBuffer landedView() {
      return null;
    }
  }

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
        InputStream whole = new java.io.SequenceInputStream(head, new StreamedBlock(req.holder, block, landed, available)) {
          @Override
          public void close() throws IOException {
            super.close(); // closes every remaining stream of the sequence
            head.close();
          }
        };
        this.stream = check == null ? whole : new VerifyingStream(whole, check);
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
          large.add(new StreamedBlock(h, b, 0, -1));
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

  private static long align8(long bytes) {
    return (bytes + 7) & ~7L;
  }

  /** Landing bytes for a request: data capacity, then the block table's records, then the signal. */
  private static long landingNeed(long capacity, int records) {
    return align8(capacity) + (long) ShuffleMessages.TABLE_ENTRY * records + 8;
  }

  private static long readLength(LandingPool.Range range, long at) {
    return range.view(at, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong(0);
  }

  private void issue() throws BlockFetchException {
    while (!toIssue.isEmpty()) {
      Req r = toIssue.peek();
      long need = landingNeed(r.bytes, r.records);
      if (reserved > 0 && reserved + need > maxBytesInFlight) {
        return;
      }
      LandingPool.Range range = node.landing().tryAllocate(need);
      if (range == null) {
        if (reserved > 0) {
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
          lengths + (long) ShuffleMessages.TABLE_ENTRY * r.records);
      inFlight.add(r);
      requestsSent++;
      r.pending.done.whenComplete((v, e) -> completed.add(r));
    }
  }

  private LandingPool.Range allocateWaiting(long need, BlockId block, String holderId) throws BlockFetchException {
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
    long table = align8(r.bytes);
    long[] available = new long[n];
    long[][] lengths = new long[n][];
    long[][] expected = new long[n][];
    int record = 0;
    for (int i = 0; i < n; i++) {
      RemoteBlock b = r.blocks.get(i);
      int k = b.id().partitions();
      lengths[i] = new long[k];
      expected[i] = new long[k];
      for (int j = 0; j < k; j++, record++) {
        long len = readLength(r.range, table + (long) ShuffleMessages.TABLE_ENTRY * record);
        expected[i][j] = readLength(r.range, table + (long) ShuffleMessages.TABLE_ENTRY * record + 8);
        if (len < 0 || len > Long.MAX_VALUE - available[i]) {
          r.release();
          throw badTable(b, r.holder, "a length of " + len + " bytes" + (k > 1 ? " for partition "
              + (b.id().partition() + j) : "") + ", expected >= 0" + (len < 0 ? "" : " and a block of at most "
              + Long.MAX_VALUE + " bytes"));
        }
        lengths[i][j] = len;
        available[i] += len;
      }
    }
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
        String mismatch = mismatch(r.range, at, b.id(), lengths[i], expected[i]);
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
          : new PartitionCheck(b.id(), r.holder.holderId(), lengths[i], expected[i])));
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

  private static BlockFetchException badTable(RemoteBlock b, HolderPlan holder, String what) {
    return new BlockFetchException(b.id(), holder.holderId(), "its block table is wrong: it reported " + what,
        new TransportException(TransportError.MALFORMED, "bad block table from holder " + holder.holderId()));
  }

  private long checksumOf(java.nio.ByteBuffer data) {
    java.util.zip.Checksum c = checksum.newChecksum();
    c.update(data);
    return c.getValue();
  }

  /**
   * The first partition of a block landed whole at {@code at} whose bytes do not match its
   * checksum, described as "ALGORITHM got 0x.., expected 0x.." (with the partition for a batch
   * block); null when all match.
   */
  private String mismatch(LandingPool.Range range, long at, BlockId id, long[] lengths, long[] expected) {
    long off = at;
    for (int j = 0; j < lengths.length; j++) {
      long got = checksumOf(range.view(off, lengths[j]));
      if (got != expected[j]) {
        return (id.isBatch() ? "partition " + (id.partition() + j) + ": " : "") + checksum + " got 0x"
            + Long.toHexString(got) + ", expected 0x" + Long.toHexString(expected[j]);
      }
      off += lengths[j];
    }
    return null;
  }

  /**
   * Checks a block's bytes, read in order from its start, against the checksum of each of its
   * partitions, each when that partition's last byte has gone by; {@link #end} checks that no
   * partition is short. One task thread.
   */
  private final class PartitionCheck {
    private final BlockId block;
    private final String holderId;
    private final long[] lengths;
    private final long[] expected;
    private final java.util.zip.Checksum c = checksum.newChecksum();
    private int index;
    private long left;

    PartitionCheck(BlockId block, String holderId, long[] lengths, long[] expected) {
      this.block = block;
      this.holderId = holderId;
      this.lengths = lengths;
      this.expected = expected;
      this.left = lengths[0];
    }

    void update(int b) throws BlockFetchException {
      update(new byte[] {(byte) b}, 0, 1);
    }

    void update(byte[] buf, int off, int len) throws BlockFetchException {
      while (true) {
        while (left == 0 && index < lengths.length) {
          verify(); // also partitions with no bytes
        }
        if (len == 0) {
          return;
        }
        if (index == lengths.length) {
          throw new BlockFetchException(block, holderId, "more bytes than the " + total() + " its holder reported",
              new TransportException(TransportError.MALFORMED, "block " + block + " is longer than reported"));
        }
        int n = (int) Math.min(len, left);
        c.update(buf, off, n);
        off += n;
        len -= n;
        left -= n;
      }
    }

    /** At the end of the stream: every partition must have had all its bytes. */
    void end() throws BlockFetchException {
      update(new byte[0], 0, 0);
      if (index < lengths.length) {
        throw new BlockFetchException(block, holderId, "the stream ended " + left + " bytes short of partition "
            + (block.partition() + index) + "'s " + lengths[index] + " bytes",
            new TransportException(TransportError.MALFORMED, "block " + block + " is shorter than reported"));
      }
    }

    private long total() {
      long t = 0;
      for (long l : lengths) {
        t += l;
      }
      return t;
    }

    private void verify() throws BlockFetchException {
      long got = c.getValue();
      if (got != expected[index]) {
        throw new BlockFetchException(block, holderId, "checksum mismatch " + (block.isBatch() ? "in partition "
            + (block.partition() + index) + " of a streamed batch block" : "at the end of a streamed block") + " ("
            + checksum + " got 0x" + Long.toHexString(got) + ", expected 0x" + Long.toHexString(expected[index]) + ")",
            new TransportException(TransportError.CHECKSUM_MISMATCH, "block " + block + " arrived corrupt"));
      }
      c.reset();
      index++;
      left = index < lengths.length ? lengths[index] : 0;
    }
  }

  /** Passes a block's bytes through a {@link PartitionCheck}. */
  private static final class VerifyingStream extends java.io.FilterInputStream {
    private final PartitionCheck check;
    private boolean ended;

    VerifyingStream(InputStream in, PartitionCheck check) {
      super(in);
      this.check = check;
    }

    @Override
    public int read() throws IOException {
      int b = in.read();
      if (b < 0) {
        end();
      } else {
        check.update(b);
      }
      return b;
    }

    @Override
    public int read(byte[] buf, int off, int len) throws IOException {
      int n = in.read(buf, off, len);
      if (n < 0) {
        end();
      } else {
        check.update(buf, off, n);
      }
      return n;
    }

    @Override
    public long skip(long n) throws IOException {
      byte[] tmp = new byte[(int) Math.min(n, 8192)];
      long done = 0;
      while (done < n) {
        int k = read(tmp, 0, (int) Math.min(tmp.length, n - done));
        if (k < 0) {
          break;
        }
        done += k;
      }
      return done;
    }

    private void end() throws IOException {
      if (!ended) {
        ended = true;
        check.end();
      }
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

  /**
   * A block, or the rest of one, fetched chunk by chunk while it is read; the holder's length
   * reports tell where it ends.
   */
  private final class StreamedBlock extends InputStream implements FetchedBlock {
    private final HolderPlan holder;
    private final RemoteBlock block;
    private final boolean fromStart;
    /** From the start, with checksums on: set up from the first chunk's block table. */
    private PartitionCheck check;
    /** The block's length from the first chunk's length report; -1 before. */
    private long total = -1;
    private long nextChunkOffset;
    private boolean lastRequested;
    private Chunk reading;
    private Chunk prefetched;
    private boolean done;

    private final class Chunk {
      final LandingPool.Range range;
      final PendingRequest pending;
      final long blockOffset;
      final long capacity;
      InputStream data;

      Chunk(LandingPool.Range range, PendingRequest pending, long blockOffset, long capacity) {
        this.range = range;
        this.pending = pending;
        this.blockOffset = blockOffset;
        this.capacity = capacity;
      }
    }

    /**
     * @param startOffset where in the block the first chunk starts
     * @param knownTotal the block's length as its holder already reported it, or -1
     */
    StreamedBlock(HolderPlan holder, RemoteBlock block, long startOffset, long knownTotal) {
      this.holder = holder;
      this.block = block;
      this.nextChunkOffset = startOffset;
      this.total = knownTotal;
      // A tail's bytes are checked by the LandedBlock's own VerifyingStream, with its head's.
      this.fromStart = startOffset == 0;
    }

    @Override public BlockId id() { return block.id(); }
    @Override public String holderId() { return holder.holderId(); }
    @Override public long size() { return block.size(); }
    @Override public InputStream stream() { return this; }

    @Override
    public long exactSize() throws IOException {
      if (total < 0 && !done) {
        data(); // lands the first chunk (nothing is read from it)
      }
      if (total < 0) {
        throw new IllegalStateException("block " + block.id() + " was closed before its first chunk landed");
      }
      return total;
    }

    private Chunk request(boolean mayWait) throws BlockFetchException {
      if (lastRequested) {
        return null;
      }
      long cap = maxRequestBytes;
      int records = block.id().partitions();
      long need = landingNeed(cap, records);
      LandingPool.Range range = node.landing().tryAllocate(need);
      if (range == null) {
        if (!mayWait) {
          return null;
        }
        range = allocateWaiting(need, block.id(), holder.holderId());
      }
      long lengths = align8(cap);
      PendingRequest p = node.send(holder.endpoint(), shuffleId, range, List.of(new ShuffleMessages.Entry(
          block.id().mapId(), block.id().partition(), block.id().endPartition(), nextChunkOffset, cap, 0)), lengths,
          lengths + (long) ShuffleMessages.TABLE_ENTRY * records);
      requestsSent++;
      Chunk c = new Chunk(range, p, nextChunkOffset, cap);
      nextChunkOffset += cap;
      return c;
    }

    private void await(Chunk c) throws BlockFetchException {
      long t0 = System.nanoTime();
      try {
        c.pending.done.get(timeoutNanos + TimeUnit.SECONDS.toNanos(1), TimeUnit.NANOSECONDS);
      } catch (ExecutionException e) {
        drop(c);
        throw new BlockFetchException(block.id(), holder.holderId(), e.getCause().getMessage(), e.getCause());
      } catch (TimeoutException e) {
        drop(c);
        throw new BlockFetchException(block.id(), holder.holderId(), "chunk not written within the deadline",
            new TransportException(TransportError.TIMEOUT, "fetch deadline passed"));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        drop(c);
        throw new BlockFetchException(block.id(), holder.holderId(), "interrupted", e);
      } finally {
        metrics.fetchWaitNanos(System.nanoTime() - t0);
      }
      int k = block.id().partitions();
      long[] lengths = new long[k];
      long[] expected = new long[k];
      long available = 0;
      for (int j = 0; j < k; j++) {
        long at = align8(c.capacity) + (long) ShuffleMessages.TABLE_ENTRY * j;
        lengths[j] = readLength(c.range, at);
        expected[j] = readLength(c.range, at + 8);
        if (lengths[j] < 0 || lengths[j] > Long.MAX_VALUE - c.blockOffset - available) {
          drop(c);
          throw badTable(block, holder, "a length of " + lengths[j] + " bytes" + (k > 1 ? " for partition "
              + (block.id().partition() + j) : "") + " from offset " + c.blockOffset + ", expected between 0 and "
              + (Long.MAX_VALUE - c.blockOffset - available));
        }
        available += lengths[j];
      }
      if (total >= 0 && c.blockOffset + available != total) {
        drop(c);
        throw badTable(block, holder, available + " bytes from offset " + c.blockOffset + " (a length of "
            + (c.blockOffset + available) + "), expected " + (total - c.blockOffset) + " (it reported a length of "
            + total + " before)");
      }
      long landed = Math.min(available, c.capacity);
      if (total < 0) {
        total = c.blockOffset + available;
      }
      if (available <= c.capacity) {
        lastRequested = true; // this chunk holds the end of the block
      }
      if (fromStart && c.blockOffset == 0 && checksum != ChecksumAlgorithm.NONE) {
        check = new PartitionCheck(block.id(), holder.holderId(), lengths, expected); // full lengths at offset 0
      }
      // One block however many chunks it takes, as Spark counts a block fetched as a stream.
      if (c.blockOffset == 0) {
        metrics.remoteBlockFetched(landed);
      } else {
        metrics.remoteBytesFetched(landed);
      }
      node.onBytesFetched(landed);
      c.data = new ByteBuffersInputStream(List.of(c.range.view(0, landed)), c.range::free);
    }

    /** The chunk to read from, fetching and prefetching as needed; null at the end. */
    private InputStream data() throws IOException {
      if (done) {
        return null;
      }
      if (reading != null && reading.data.available() > 0) {
        return reading.data;
      }
      if (reading != null) {
        reading.data.close();
        reading = null;
      }
      Chunk next = prefetched != null ? prefetched : request(true);
      prefetched = null;
      if (next == null) {
        done = true;
        if (check != null) {
          check.end();
        }
        return null;
      }
      await(next);
      reading = next;
      if (lastRequested && next.data.available() == 0) {
        return data();
      }
      prefetched = request(false);
      return reading.data;
    }

    @Override
    public int read() throws IOException {
      InputStream d = data();
      if (d == null) {
        return -1;
      }
      int b = d.read();
      if (check != null && b >= 0) {
        check.update(b);
      }
      return b;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (len == 0) {
        return 0;
      }
      InputStream d = data();
      if (d == null) {
        return -1;
      }
      int n = d.read(b, off, len);
      if (check != null && n > 0) {
        check.update(b, off, n);
      }
      return n;
    }

    @Override
    public void close() {
      done = true;
      if (reading != null) {
        try {
          reading.data.close();
        } catch (IOException e) {
          // cannot happen
        }
        reading = null;
      }
      if (prefetched != null) {
        drop(prefetched);
        prefetched = null;
      }
    }

    /** Ends a chunk's request (revoking its registration) and frees its range. */
    private void drop(Chunk c) {
      node.cancel(c.pending, "its reduce task stopped reading block " + block.id());
      c.range.free();
    }
  }
}
