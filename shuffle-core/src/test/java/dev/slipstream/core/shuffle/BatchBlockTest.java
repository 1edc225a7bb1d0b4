package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.shuffle.ShuffleMessages.Entry;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.RemoteAddress;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Batch blocks (Spark's {@code ShuffleBlockBatchId}): adjacent partitions of one map output asked
 * for as one write request entry and handed out as one block, each partition checked against its
 * own checksum, whatever layout holds the output; and blocks counted as Spark counts them.
 */
class BatchBlockTest {
  /** Partition sizes: empty ones between and at the edges, one spanning pages (4 KiB). */
  private static final int[] SIZES = {0, 300, 0, 5000, 1200, 0, 7, 0};

  @TempDir Path tmp;
  private final TestNodes nodes = new TestNodes(new LoopbackFabric());
  private final List<WriteRequest> sent = new CopyOnWriteArrayList<>();
  private ShuffleNode holder;
  private ShuffleNode reader;

  /** Counts what the fetcher reports, as the plugin maps it onto Spark's read metrics. */
  private static final class Counts implements FetchMetrics {
    int blocks;
    long bytes;

    @Override public void remoteBlockFetched(long b) {
      blocks++;
      bytes += b;
    }

    @Override public void remoteBytesFetched(long b) {
      bytes += b;
    }

    @Override public void localBlockRead(long b) {}

    @Override public void fetchWaitNanos(long nanos) {}
  }

  private void start(UnaryOperator<Transport> holderWrap) throws TransportException {
    Map<String, String> conf = TestNodes.conf("5s");
    conf.put("spark.shuffle.checksum.enabled", "true");
    holder = nodes.node(conf, tmp, "holder", holderWrap);
    reader = nodes.node(conf, tmp, "reader", this::recordingRequests);
  }

  @AfterEach
  void stop() {
    if (reader != null) {
      reader.close();
      holder.close();
    }
  }

  /** The reader's transport, decoding every write request it sends. */
  private Transport recordingRequests(Transport t) {
    return new ForwardingTransport(t) {
      @Override
      public PeerQueue connect(EndpointDescriptor peer) throws TransportException {
        PeerQueue q = inner.connect(peer);
        return new PeerQueue() {
          @Override public EndpointDescriptor peer() { return q.peer(); }
          @Override public CompletableFuture<Void> write(ByteBuffer src, RemoteAddress dst) { return q.write(src, dst); }
          @Override public CompletableFuture<Void> writeAndSignal(ByteBuffer src, RemoteAddress dst, RemoteAddress s,
                                                                  long d) {
            return q.writeAndSignal(src, dst, s, d);
          }
          @Override public CompletableFuture<Void> signal(RemoteAddress s, long d) { return q.signal(s, d); }
          @Override public CompletableFuture<Long> fetchAdd(RemoteAddress dst, long d) { return q.fetchAdd(dst, d); }
          @Override public CompletableFuture<Void> send(ByteBuffer m) {
            try {
              if (ShuffleMessages.decode(m.duplicate()) instanceof WriteRequest w) {
                sent.add(w);
              }
            } catch (TransportException e) {
              throw new AssertionError("the reader sent an undecodable message", e);
            }
            return q.send(m);
          }
          @Override public void commit() { q.commit(); }
          @Override public boolean isOpen() { return q.isOpen(); }
          @Override public void close() { q.close(); }
        };
      }
    };
  }

  private static byte[][] data(int[] sizes, long seed) {
    Random r = new Random(seed);
    byte[][] d = new byte[sizes.length][];
    for (int p = 0; p < sizes.length; p++) {
      d[p] = new byte[sizes[p]];
      r.nextBytes(d[p]);
    }
    return d;
  }

  /** One contiguous run of every partition (the sorted writers' layout). */
  private byte[][] writeContiguous(long mapId, int[] sizes) throws IOException {
    byte[][] d = data(sizes, mapId);
    MapOutputWriter w = holder.store().newOutput(1, mapId, sizes.length);
    for (int p = 0; p < sizes.length; p++) {
      if (sizes[p] > 0) {
        try (OutputStream o = w.openPartition(p)) {
          o.write(d[p]);
        }
      }
    }
    w.commit();
    return d;
  }

  /** A page chain per partition (the direct writer's layout, when packing them would free too little). */
  private byte[][] writePerPartition(long mapId, int[] sizes) throws IOException {
    byte[][] d = data(sizes, mapId);
    PartitionedOutputWriter w = holder.store().newPartitionedOutput(1, mapId, sizes.length);
    for (int p = 0; p < sizes.length; p++) {
      if (sizes[p] > 0) {
        w.partition(p).write(d[p]);
      }
    }
    w.commit();
    return d;
  }

  private static byte[] concat(byte[][] d, int from, int to) {
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    for (int p = from; p < to; p++) {
      o.writeBytes(d[p]);
    }
    return o.toByteArray();
  }

  private static long sum(int[] sizes, int from, int to) {
    long t = 0;
    for (int p = from; p < to; p++) {
      t += sizes[p];
    }
    return t;
  }

  private byte[] fetchOne(BlockId id, long size, Counts counts) throws IOException {
    try (BlockFetcher f = reader.newFetcher(1, List.of(new BlockFetcher.HolderPlan("holder", holder.localEndpoint(),
        List.of(new BlockFetcher.RemoteBlock(id, size)))), counts)) {
      FetchedBlock b = f.next();
      assertEquals(id, b.id());
      ByteArrayOutputStream o = new ByteArrayOutputStream();
      try (InputStream in = b.stream()) {
        in.transferTo(o);
      }
      assertFalse(f.hasNext(), "one block handed out");
      return o.toByteArray();
    }
  }

  private void assertOneBatchEntry(BlockId id) {
    assertEquals(1, sent.size(), "one write request: " + sent);
    List<Entry> entries = sent.get(0).entries();
    assertEquals(1, entries.size(), "one entry for the whole batch: " + entries);
    assertEquals(id.partition(), entries.get(0).partition());
    assertEquals(id.endPartition(), entries.get(0).endPartition());
  }

  @Test
  void aBatchOfAContiguousOutputMovesAsOneEntryAndCountsAsOneBlock() throws Exception {
    start(t -> t);
    byte[][] d = writeContiguous(7L, SIZES);
    BlockId id = new BlockId(1, 7L, 1, 7);
    Counts counts = new Counts();
    assertArrayEquals(concat(d, 1, 7), fetchOne(id, sum(SIZES, 1, 7), counts));
    assertOneBatchEntry(id);
    assertEquals(1, counts.blocks);
    assertEquals(sum(SIZES, 1, 7), counts.bytes);
    assertEquals(0, reader.checksumRetries());
    assertEquals(0, reader.landing().used(), "all landing space is back");
  }

  @Test
  void aBatchOfAPerPartitionOutputMovesAsOneEntry() throws Exception {
    start(t -> t);
    int[] sizes = {5000, 0, 9000};
    byte[][] d = writePerPartition(8L, sizes);
    MapOutput out = holder.store().retain(1, 8L);
    int views = out.runSlices(0, 3, 0, sum(sizes, 0, 3)).size();
    out.release();
    assertEquals(2 + 3, views, "the output kept a page chain per partition (packed it would take 4 pages)");
    BlockId id = new BlockId(1, 8L, 0, 3);
    Counts counts = new Counts();
    assertArrayEquals(concat(d, 0, 3), fetchOne(id, sum(sizes, 0, 3), counts));
    assertOneBatchEntry(id);
    assertEquals(1, counts.blocks);
  }

  @Test
  void aBatchLargerThanOneRequestStreamsFromItsStartAndChecksEachPartition() throws Exception {
    start(t -> t);
    int[] sizes = {5000, 0, 9000, 4100, 20_000};
    byte[][] d = writeContiguous(6L, sizes);
    BlockId id = new BlockId(1, 6L, 0, 5);
    Counts counts = new Counts();
    assertArrayEquals(concat(d, 0, 5), fetchOne(id, sum(sizes, 0, 5), counts)); // 16 KiB requests
    assertTrue(sent.size() > 1, "in chunks: " + sent.size());
    assertEquals(1, counts.blocks);
    assertEquals(sum(sizes, 0, 5), counts.bytes);

    corruptAtRest(6L, 3, 100);
    IOException e = assertThrows(IOException.class, () -> fetchOne(id, sum(sizes, 0, 5), new Counts()));
    BlockFetchException bfe = e instanceof BlockFetchException b ? b : (BlockFetchException) e.getCause();
    assertTrue(bfe.getMessage().contains("checksum mismatch in partition 3 of a streamed batch block"),
        bfe.getMessage());
  }

  @Test
  void aBatchOfAnOutputMovedToDiskIsReadFromItsFile() throws Exception {
    start(t -> t);
    byte[][] d = writeContiguous(9L, SIZES);
    MapOutput out = holder.store().retain(1, 9L);
    out.release();
    assertTrue(out.evictToFile() > 0, "moved to a file");
    assertFalse(out.inMemory());
    assertArrayEquals(concat(d, 3, 8), fetchOne(new BlockId(1, 9L, 3, 8), sum(SIZES, 3, 8), new Counts()));
  }

  @Test
  void localReadOfABatchIsItsPartitionsOneAfterAnother() throws Exception {
    start(t -> t);
    byte[][] d = writeContiguous(7L, SIZES);
    MapOutput out = holder.store().retain(1, 7L);
    try (InputStream in = out.open(2, 5)) {
      assertArrayEquals(concat(d, 2, 5), in.readAllBytes());
    } finally {
      out.release();
    }
  }

  @Test
  void corruptionInFlightOfABatchIsRepairedByOneRefetch() throws Exception {
    start(t -> new CorruptingTransport(t, 1));
    byte[][] d = writeContiguous(7L, SIZES);
    assertArrayEquals(concat(d, 0, 8), fetchOne(new BlockId(1, 7L, 0, 8), sum(SIZES, 0, 8), new Counts()));
    assertEquals(1, reader.checksumRetries());
  }

  /** Flips a byte of {@code partition} in the holder's store. */
  private void corruptAtRest(long mapId, int partition, long offset) throws IOException {
    MapOutput out = holder.store().retain(1, mapId);
    ByteBuffer b = out.slices(partition, offset, 1).get(0);
    b.put(b.position(), (byte) (b.get(b.position()) ^ 0x01));
    out.release();
  }

  @Test
  void aCorruptPartitionOfABatchFailsTheFetchNamingThePartition() throws Exception {
    start(t -> t);
    writeContiguous(7L, SIZES);
    corruptAtRest(7L, 4, 10);
    BlockFetcher.FetchFailure e = assertThrows(BlockFetcher.FetchFailure.class,
        () -> fetchOne(new BlockId(1, 7L, 1, 7), sum(SIZES, 1, 7), new Counts()));
    assertEquals(new BlockId(1, 7L, 1, 7), e.getCause().block());
    assertEquals(TransportError.CHECKSUM_MISMATCH, ((TransportException) e.getCause().getCause()).error());
    assertTrue(e.getMessage().contains("checksum mismatch again after a refetch (partition 4: CRC32C got 0x"),
        e.getMessage());
    assertEquals(1, reader.checksumRetries());
  }

  @Test
  void aBatchLongerThanItsMapStatusStreamsItsTailAndChecksEachPartition() throws Exception {
    start(t -> t);
    int[] sizes = {9000, 0, 20_000, 3, 15_000};
    byte[][] d = writeContiguous(5L, sizes);
    BlockId id = new BlockId(1, 5L, 0, 5);
    Counts counts = new Counts();
    // Averaged map-status sizes (above 2000 partitions) can be smaller than the real ones.
    assertArrayEquals(concat(d, 0, 5), fetchOne(id, 1000, counts));
    assertEquals(1, counts.blocks, "one block, however many chunks its tail took");
    assertEquals(sum(sizes, 0, 5), counts.bytes);
    assertTrue(sent.size() > 2, "the tail came in further requests: " + sent.size());
    sent.forEach(w -> assertEquals(List.of(5), w.entries().stream().map(Entry::endPartition).distinct().toList()));

    corruptAtRest(5L, 2, 12_000); // in the streamed tail
    IOException e = assertThrows(IOException.class, () -> fetchOne(id, 1000, new Counts()));
    BlockFetchException bfe = e instanceof BlockFetchException b ? b : (BlockFetchException) e.getCause();
    assertTrue(bfe.getMessage().contains("checksum mismatch in partition 2 of a streamed batch block"),
        bfe.getMessage());
  }

  @Test
  void aBlockStreamedInChunksCountsAsOneBlock() throws Exception {
    start(t -> t);
    int[] sizes = {100_000};
    byte[][] d = writeContiguous(3L, sizes);
    Counts counts = new Counts();
    assertArrayEquals(d[0], fetchOne(new BlockId(1, 3L, 0), 100_000, counts)); // 16 KiB requests: 7 chunks
    assertTrue(sent.size() >= 7, "streamed in chunks: " + sent.size());
    assertEquals(1, counts.blocks, "Spark counts a block fetched as a stream once");
    assertEquals(100_000, counts.bytes);
  }

  @Test
  void writeRequestCodecCarriesPartitionRangesAndBoundsTheirRecords() throws Exception {
    RegionDescriptor landing = new RegionDescriptor(1, 0, 1 << 20, 3, MemoryKind.HOST, 0);
    WriteRequest w = new WriteRequest(5, 1, new NodeIdentity(TestNodes.APP, "r"), 1000, landing, 4096, 8192,
        List.of(new Entry(7L, 2, 40, 0, 100, 0), new Entry(8L, 3, 0, 50, 104)));
    WriteRequest back = (WriteRequest) ShuffleMessages.decode(w.encode());
    assertEquals(w.entries(), back.entries());
    assertEquals(39, back.tableRecords());

    List<Entry> tooMany = new ArrayList<>();
    tooMany.add(new Entry(7L, 0, ShuffleMessages.MAX_TABLE_RECORDS, 0, 100, 0));
    tooMany.add(new Entry(8L, 0, 0, 100, 104));
    TransportException e = assertThrows(TransportException.class, () -> ShuffleMessages.decode(
        new WriteRequest(5, 1, new NodeIdentity(TestNodes.APP, "r"), 1000, landing, 4096, 8192, tooMany).encode()));
    assertEquals(TransportError.MALFORMED, e.error());
    assertTrue(e.getMessage().contains("cover " + (ShuffleMessages.MAX_TABLE_RECORDS + 1) + " partitions"),
        e.getMessage());

    TransportException empty = assertThrows(TransportException.class, () -> ShuffleMessages.decode(
        new WriteRequest(5, 1, new NodeIdentity(TestNodes.APP, "r"), 1000, landing, 4096, 8192,
            List.of(new Entry(7L, 4, 4, 0, 100, 0))).encode()));
    assertTrue(empty.getMessage().contains("partitions [4, 4)"), empty.getMessage());
  }
}
