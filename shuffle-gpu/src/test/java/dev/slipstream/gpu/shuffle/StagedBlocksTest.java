package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.config.CoreConfig;
import dev.slipstream.core.shuffle.BlockFetchException;
import dev.slipstream.core.shuffle.BlockFetcher;
import dev.slipstream.core.shuffle.FetchedBlock;
import dev.slipstream.core.shuffle.BlockId;
import dev.slipstream.core.shuffle.ChecksumAlgorithm;
import dev.slipstream.core.shuffle.FetchMetrics;
import dev.slipstream.core.shuffle.ServedOutput;
import dev.slipstream.core.shuffle.ShuffleNode;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import dev.slipstream.core.transport.loopback.LoopbackTransportProvider;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The GPU shuffle's staging path without a GPU: a device map-output store over host memory served by
 * one shuffle node's block server to another's block fetcher over the loopback transport, each block
 * in its served form (packed bytes and a rows trailer) landed and checked as a reduce task does.
 */
class StagedBlocksTest {
  private static final int[] W = {8, 4};
  @TempDir Path tmp;

  /** One map output of {@code rows.length} partitions of random bytes; returns each block's bytes. */
  private static byte[][] put(DeviceMapOutputStore s, int shuffle, long map, long[] rows, long seed) {
    long[] offsets = new long[rows.length + 1];
    for (int p = 0; p < rows.length; p++) {
      offsets[p + 1] = offsets[p] + BatchLayout.packedBytes(rows[p], W);
    }
    byte[] all = new byte[(int) offsets[rows.length]];
    new Random(seed).nextBytes(all);
    OutputSpace.Block b = s.allocate(Math.max(16, all.length));
    b.write(0, all, 0, all.length);
    s.commit(shuffle, map, b, W, offsets, rows);
    byte[][] blocks = new byte[rows.length][];
    for (int p = 0; p < rows.length; p++) {
      blocks[p] = java.util.Arrays.copyOfRange(all, (int) offsets[p], (int) offsets[p + 1]);
    }
    return blocks;
  }

  private static byte[] served(byte[] block, long rows) {
    ByteBuffer b = ByteBuffer.allocate(block.length + StagedBlocks.TRAILER).order(ByteOrder.LITTLE_ENDIAN);
    b.put(block).putLong(rows).putLong(StagedBlocks.MAGIC);
    return b.array();
  }

  private static byte[] concat(List<ByteBuffer> parts) {
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    for (ByteBuffer p : parts) {
      ByteBuffer d = p.duplicate();
      byte[] a = new byte[d.remaining()];
      d.get(a);
      o.writeBytes(a);
    }
    return o.toByteArray();
  }

  @Test
  void aServedOutputIsTheBlockThenItsRowsTrailerWithAChecksumOverBothAndStaysPinnedUntilReleased() throws Exception {
    HostOutputSpace space = new HostOutputSpace();
    try (DeviceMapOutputStore store = new DeviceMapOutputStore(space, 1 << 20, 0)) {
      long[] rows = {3, 0, 1001};
      byte[][] blocks = put(store, 4, 9, rows, 1);
      ServedOutput.Source source = StagedBlocks.source(store, ChecksumAlgorithm.CRC32C);
      assertNull(source.retain(4, 10), "a map output the store does not have");
      assertNull(source.retain(5, 9));
      ServedOutput out = source.retain(4, 9);
      assertEquals(3, out.numPartitions());
      assertEquals(0, out.partitionLength(1), "an empty block stays empty");
      for (int p : new int[] {0, 2}) {
        byte[] want = served(blocks[p], rows[p]);
        assertEquals(want.length, out.partitionLength(p));
        CRC32C c = new CRC32C();
        c.update(want);
        assertEquals(c.getValue(), out.checksum(p), "checksum of partition " + p + " before any slice");
        assertArrayEquals(want, concat(out.slices(p, 0, want.length)), "partition " + p);
        assertEquals(c.getValue(), out.checksum(p));
        // Ranges that end inside the data, straddle the trailer, or lie inside it.
        for (long[] r : new long[][] {{1, 7}, {want.length - 20, 11}, {want.length - 9, 9}, {want.length, 0}}) {
          assertArrayEquals(java.util.Arrays.copyOfRange(want, (int) r[0], (int) (r[0] + r[1])),
              concat(out.slices(p, r[0], r[1])), "partition " + p + " range " + r[0] + "+" + r[1]);
        }
      }
      long len0 = BatchLayout.packedBytes(3, W) + StagedBlocks.TRAILER; // 32 + 32 + 16 + 16
      assertEquals(96, len0);
      assertEquals("range offset 0 + length 97 outside the served GPU block of partition 0 (length 96)",
          assertThrows(IndexOutOfBoundsException.class, () -> out.slices(0, 0, len0 + 1)).getMessage());
      assertEquals("partition 3 outside [0, 3) of a GPU map output",
          assertThrows(IndexOutOfBoundsException.class, () -> out.partitionLength(3)).getMessage());
      // Pinned: removing the shuffle keeps its memory until the served output is released (twice is once).
      long live = space.live();
      assertEquals(1, store.removeShuffle(4));
      assertEquals(live, space.live());
      out.release();
      out.release();
      assertEquals(0, space.live());
      assertEquals("GPU map output read after its release",
          assertThrows(IllegalStateException.class, () -> out.slices(0, 0, 8)).getMessage());
    }
  }

  /** Host space that counts the bytes read out of its blocks. */
  private static final class CountingSpace implements OutputSpace {
    final HostOutputSpace inner = new HostOutputSpace();
    final java.util.concurrent.atomic.AtomicLong read = new java.util.concurrent.atomic.AtomicLong();

    @Override
    public Block allocate(long bytes) {
      Block b = inner.allocate(bytes);
      return new Block() {
        @Override public long length() { return b.length(); }
        @Override public long address() { return b.address(); }
        @Override public void write(long offset, byte[] src, int off, int len) { b.write(offset, src, off, len); }
        @Override public void close() { b.close(); }

        @Override
        public void read(long offset, byte[] dst, int off, int len) {
          read.addAndGet(len);
          b.read(offset, dst, off, len);
        }
      };
    }
  }

  @Test
  void aBlocksChecksumIsComputedOnceAndKeptWithTheOutput() throws Exception {
    CountingSpace space = new CountingSpace();
    try (DeviceMapOutputStore store = new DeviceMapOutputStore(space, 1 << 20, 0)) {
      long[] rows = {500, 700};
      byte[][] blocks = put(store, 1, 1, rows, 5);
      ServedOutput.Source source = StagedBlocks.source(store, ChecksumAlgorithm.CRC32C);
      ServedOutput a = source.retain(1, 1);
      long sum0 = a.checksum(0);
      assertEquals(blocks[0].length, space.read.get(), "the block read once to sum it");
      assertEquals(blocks[1].length + 16, concat(a.slices(1, 0, blocks[1].length + 16)).length);
      long afterSlices = space.read.get();
      long sum1 = a.checksum(1); // summed while the whole block was sliced
      assertEquals(afterSlices, space.read.get());
      a.release();
      ServedOutput b = source.retain(1, 1); // as the next chunk's request of a streamed block does
      assertEquals(sum0, b.checksum(0));
      assertEquals(sum1, b.checksum(1));
      assertEquals(afterSlices, space.read.get(), "no block read again for its checksum");
      CRC32C c = new CRC32C();
      c.update(served(blocks[1], rows[1]));
      assertEquals(c.getValue(), sum1);
      b.release();
    }
  }

  @Test
  void stagingBuffersGoBackOnceEachAtTheRelease() throws Exception {
    try (DeviceMapOutputStore store = new DeviceMapOutputStore(new HostOutputSpace(), 16 << 20, 0)) {
      long rows = (StagedBlocks.PIECE + StagedBlocks.PIECE / 2) / 20; // 1.5 pieces of 8 + 8 + 4 bytes per row
      byte[][] blocks = put(store, 1, 1, new long[] {rows}, 9);
      StagedBlocks.Staging staging = new StagedBlocks.Staging();
      ServedOutput out = StagedBlocks.source(store, ChecksumAlgorithm.CRC32C, staging).retain(1, 1);
      out.checksum(0); // stages piece by piece, giving each back at once
      assertEquals(1, staging.idle());
      List<ByteBuffer> parts = out.slices(0, 0, out.partitionLength(0));
      assertEquals(3, parts.size(), "two pieces and the trailer");
      assertTrue(parts.get(0).isDirect() && parts.get(1).isDirect());
      assertArrayEquals(served(blocks[0], rows), concat(parts));
      assertEquals(0, staging.idle(), "both pieces held until the release");
      out.release();
      assertEquals(2, staging.idle(), "each piece given back once");
      ServedOutput again = StagedBlocks.source(store, ChecksumAlgorithm.CRC32C, staging).retain(1, 1);
      assertArrayEquals(served(blocks[0], rows), concat(again.slices(0, 0, again.partitionLength(0))));
      assertEquals(0, staging.idle(), "the idle pieces reused");
      again.release();
      assertEquals(2, staging.idle());
    }
  }

  @Test
  void landingChecksTheTrailerAgainstTheBytesAndWidths() throws IOException {
    byte[] block = new byte[(int) BatchLayout.packedBytes(5, W)];
    new Random(3).nextBytes(block);
    byte[] ok = served(block, 5);
    byte[] sink = new byte[block.length];
    long rows = StagedBlocks.land(new ByteArrayInputStream(ok), ok.length, W,
        (at, src, off, len) -> System.arraycopy(src, off, sink, (int) at, len), "block b");
    assertEquals(5, rows);
    assertArrayEquals(block, sink);

    ByteBuffer direct = ByteBuffer.allocateDirect(ok.length + 7).position(7);
    direct.put(ok).position(7);
    byte[] fromView = new byte[block.length];
    assertEquals(5, StagedBlocks.land(direct.slice().asReadOnlyBuffer(), W, (at, src) -> src.duplicate().get(fromView),
        "block b"));
    assertArrayEquals(block, fromView);
    StagedBlocks.ViewSink never = (at, src) -> {
      throw new AssertionError("a damaged block wrote " + src.remaining() + " bytes");
    };
    assertEquals("block b: trailer says 9 rows, which pack into 208 bytes with column widths [8, 4], but 128 bytes came",
        assertThrows(IOException.class, () -> StagedBlocks.land(ByteBuffer.wrap(served(block, 9)), W, never, "block b"))
            .getMessage());
    assertEquals("block b: 12 bytes served, expected at least the 16-byte trailer", assertThrows(IOException.class,
        () -> StagedBlocks.land(ByteBuffer.allocate(12), W, never, "block b")).getMessage());

    StagedBlocks.Sink none = (at, src, off, len) -> {};
    assertEquals("block b: the stream ended after " + (ok.length - 1) + " of " + ok.length + " bytes",
        assertThrows(EOFException.class, () -> StagedBlocks.land(new ByteArrayInputStream(ok, 0, ok.length - 1),
            ok.length, W, none, "block b")).getMessage());
    byte[] badMagic = ok.clone();
    badMagic[badMagic.length - 1] ^= 1;
    assertTrue(assertThrows(IOException.class, () -> StagedBlocks.land(new ByteArrayInputStream(badMagic),
        badMagic.length, W, none, "block b")).getMessage().startsWith("block b: trailer magic 0x3045474154534c53,"
            + " expected 0x3145474154534c53"));
    // 5 rows of 8 + 8 + 4 bytes pack into 48 + 48 + 32 = 128 bytes; 6 rows into 48 + 48 + 32 too (padding),
    // so 6 is a size match; 9 rows is not.
    byte[] nine = served(block, 9);
    assertEquals("block b: trailer says 9 rows, which pack into 208 bytes with column widths [8, 4], but 128 bytes came",
        assertThrows(IOException.class, () -> StagedBlocks.land(new ByteArrayInputStream(nine), nine.length, W, none,
            "block b")).getMessage());
    byte[] huge = served(block, Long.MAX_VALUE);
    assertEquals("block b: trailer says " + Long.MAX_VALUE + " rows, which pack into a different size with column"
        + " widths [8, 4], but 128 bytes came", assertThrows(IOException.class, () -> StagedBlocks.land(
            new ByteArrayInputStream(huge), huge.length, W, none, "block b")).getMessage());
    assertEquals("block b: 15 bytes served, expected at least the 16-byte trailer", assertThrows(IOException.class,
        () -> StagedBlocks.land(new ByteArrayInputStream(ok), 15, W, none, "block b")).getMessage());
  }

  /** A shuffle node on {@code fabric} with {@code conf}, spilling under {@code dir/name} (also DeviceShuffleGpuTest's). */
  static ShuffleNode node(LoopbackFabric fabric, Map<String, String> conf, Path dir, String name)
      throws dev.slipstream.core.transport.TransportException {
    dev.slipstream.core.shuffle.PeerDirectory.Table peers;
    synchronized (PEERS) {
      peers = PEERS.computeIfAbsent(fabric, f -> dev.slipstream.core.shuffle.PeerDirectory.table());
    }
    ConfigSource src = ConfigSource.of(conf);
    ShuffleNode n = new ShuffleNode(new LoopbackTransportProvider(fabric).create(new TransportContext(src, "localhost",
        name, java.util.Optional.empty(), APP, name)), new CoreConfig(src), dir.resolve(name),
        new dev.slipstream.core.shuffle.NodeIdentity(APP, name), peers);
    peers.put(name, n.localEndpoint());
    return n;
  }

  private static final String APP = "app-test";
  /** One peer table per fabric, shared by the nodes made on it. */
  private static final Map<LoopbackFabric, dev.slipstream.core.shuffle.PeerDirectory.Table> PEERS =
      new java.util.WeakHashMap<>();

  @Test
  void aBlockServerServesDeviceOutputsToABlockFetcherByteExactIncludingBlocksLargerThanAsked() throws Exception {
    Map<String, String> conf = new HashMap<>();
    conf.put("spark.slipstream.landing.bytes", "1m");
    conf.put("spark.slipstream.reader.maxRequestBytes", "64k");
    conf.put("spark.slipstream.reader.maxBytesInFlight", "256k");
    conf.put("spark.slipstream.reader.fetchTimeout", "10s");
    conf.put("spark.shuffle.checksum.enabled", "true");
    LoopbackFabric fabric = new LoopbackFabric();
    HostOutputSpace space = new HostOutputSpace();
    try (ShuffleNode holder = node(fabric, conf, tmp, "holder");
        ShuffleNode reader = node(fabric, conf, tmp, "reader");
        DeviceMapOutputStore store = new DeviceMapOutputStore(space, 16 << 20, 0)) {
      assertEquals(ChecksumAlgorithm.CRC32C, holder.config().checksum());
      holder.serveAlso(StagedBlocks.source(store, holder.config().checksum()));
      long[] rows = {1, 0, 2_000, 30_000, 7};
      Map<Long, byte[][]> maps = new HashMap<>();
      for (long m = 1; m <= 3; m++) {
        maps.put(m, put(store, 2, m, rows, m));
      }
      List<BlockFetcher.RemoteBlock> want = new ArrayList<>();
      for (long m = 1; m <= 3; m++) {
        for (int p = 0; p < rows.length; p++) {
          long bytes = maps.get(m)[p].length;
          if (bytes > 0) {
            // Map 3's sizes are understated, as a highly compressed map status may: the rest streams.
            long asked = m == 3 ? Math.max(1, bytes / 3) : StagedBlocks.servedLength(bytes);
            want.add(new BlockFetcher.RemoteBlock(new BlockId(2, m, p), asked));
          }
        }
      }
      int landed = 0;
      try (BlockFetcher f = reader.newFetcher(2, List.of(new BlockFetcher.HolderPlan("holder", holder.localEndpoint(),
          want)), FetchMetrics.NONE)) {
        while (f.hasNext()) {
          FetchedBlock b = f.next();
          byte[] block = maps.get(b.id().mapId())[b.id().partition()];
          assertEquals(StagedBlocks.servedLength(block.length), b.exactSize(), "block " + b.id());
          byte[] got = new byte[block.length];
          ByteBuffer view = b.landedView();
          // Whole in one request unless its map status understated it or it is larger than a request.
          boolean whole = b.id().mapId() != 3 && block.length + 16 <= 64 * 1024;
          assertEquals(whole, view != null, "a view of " + b.id());
          long n = whole ? StagedBlocks.land(view, W, (at, src) -> src.duplicate().get(got), "block " + b.id())
              : StagedBlocks.land(b.stream(), b.exactSize(), W,
                  (at, src, off, len) -> System.arraycopy(src, off, got, (int) at, len), "block " + b.id());
          b.stream().close();
          assertEquals(rows[b.id().partition()], n, "rows of " + b.id());
          assertArrayEquals(block, got, "bytes of " + b.id());
          landed++;
        }
        assertTrue(f.requestsSent() >= 2, "split by maxRequestBytes: " + f.requestsSent());
      }
      assertEquals(want.size(), landed);
      assertEquals(0, holder.serveFailures());

      // A map output the holder has in neither store fails the fetch with the reason.
      try (BlockFetcher f = reader.newFetcher(2, List.of(new BlockFetcher.HolderPlan("holder", holder.localEndpoint(),
          List.of(new BlockFetcher.RemoteBlock(new BlockId(2, 99, 0), 64)))), FetchMetrics.NONE)) {
        BlockFetchException e = assertThrows(BlockFetcher.FetchFailure.class, f::next).getCause();
        assertTrue(e.getMessage().contains("no map output for shuffle 2 map 99 on this executor"), e.getMessage());
      }
      assertEquals(1, holder.serveFailures());
    }
    assertEquals(0, space.live(), "every pin released, every output freed");
  }
}
