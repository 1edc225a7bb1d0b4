package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A block, or the rest of one, fetched chunk by chunk while it is read; the holder's length
 * reports tell where it ends.
 */
final class StreamedBlock extends InputStream implements FetchedBlock {
  private final BlockFetcher fetcher;
  private final BlockFetcher.HolderPlan holder;
  private final BlockFetcher.RemoteBlock block;
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
  StreamedBlock(BlockFetcher fetcher, BlockFetcher.HolderPlan holder, BlockFetcher.RemoteBlock block, long startOffset, long knownTotal) {
    this.fetcher = fetcher;
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
    long cap = fetcher.maxRequestBytes();
    int records = block.id().partitions();
    long need = BlockFetcher.landingNeed(cap, records);
    LandingPool.Range range = fetcher.node().landing().tryAllocate(need);
    if (range == null) {
      if (!mayWait) {
        return null;
      }
      range = fetcher.allocateWaiting(need, block.id(), holder.holderId());
    }
    long lengths = BlockFetcher.align8(cap);
    PendingRequest p = fetcher.node().send(holder.endpoint(), fetcher.shuffleId(), range, List.of(new ShuffleMessages.Entry(
        block.id().mapId(), block.id().partition(), block.id().endPartition(), nextChunkOffset, cap, 0)), lengths,
        lengths + BlockTable.bytes(records));
    fetcher.requestSent();
    Chunk c = new Chunk(range, p, nextChunkOffset, cap);
    nextChunkOffset += cap;
    return c;
  }

  private void await(Chunk c) throws BlockFetchException {
    long t0 = System.nanoTime();
    try {
      c.pending.done.get(fetcher.timeoutNanos() + TimeUnit.SECONDS.toNanos(1), TimeUnit.NANOSECONDS);
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
      fetcher.metrics().fetchWaitNanos(System.nanoTime() - t0);
    }
    int k = block.id().partitions();
    long[] lengths = new long[k];
    long[] expected = new long[k];
    long available = 0;
    java.nio.ByteBuffer table;
    try {
      table = BlockTableRecords.header(c.range, BlockFetcher.align8(c.capacity), k, block, holder,
          c.pending.requestId);
    } catch (BlockFetchException e) {
      drop(c);
      throw e;
    }
    for (int j = 0; j < k; j++) {
      BlockTable.Record r = BlockTable.record(table, j);
      lengths[j] = r.bytes();
      expected[j] = r.checksum();
      if (lengths[j] < 0 || lengths[j] > Long.MAX_VALUE - c.blockOffset - available) {
        drop(c);
        throw BlockTableRecords.badTable(block, holder, "a length of " + lengths[j] + " bytes" + (k > 1 ? " for partition "
            + (block.id().partition() + j) : "") + " from offset " + c.blockOffset + ", expected between 0 and "
            + (Long.MAX_VALUE - c.blockOffset - available));
      }
      available += lengths[j];
    }
    if (total >= 0 && c.blockOffset + available != total) {
      drop(c);
      throw BlockTableRecords.badTable(block, holder, available + " bytes from offset " + c.blockOffset + " (a length of "
          + (c.blockOffset + available) + "), expected " + (total - c.blockOffset) + " (it reported a length of "
          + total + " before)");
    }
    long landed = Math.min(available, c.capacity);
    try {
      BlockTableRecords.checkSignalledBytes(block, holder, c.pending.signalled, landed, BlockTable.bytes(k));
    } catch (BlockFetchException e) {
      drop(c);
      throw e;
    }
    if (total < 0) {
      total = c.blockOffset + available;
    }
    if (available <= c.capacity) {
      lastRequested = true; // this chunk holds the end of the block
    }
    if (fromStart && c.blockOffset == 0 && fetcher.checksum() != ChecksumAlgorithm.NONE) {
      check = new PartitionCheck(fetcher.checksum(), block.id(), holder.holderId(), lengths, expected); // full lengths at offset 0
    }
    // One block however many chunks it takes, as Spark counts a block fetched as a stream.
    if (c.blockOffset == 0) {
      fetcher.metrics().remoteBlockFetched(landed);
    } else {
      fetcher.metrics().remoteBytesFetched(landed);
    }
    fetcher.node().onBytesFetched(landed);
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
    fetcher.node().cancel(c.pending, "its reduce task stopped reading block " + block.id());
    c.range.free();
  }
}
