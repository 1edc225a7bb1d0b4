package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import dev.slipstream.core.transport.loopback.LoopbackTransportProvider;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A holder that answers write requests with forged block tables and signals, or writes outside
 * the request's range. The reader fails the fetch naming what it got and what it expected, hands
 * out nothing, frees the range every time, and no byte lands outside the request's range.
 */
class ForgedTableTest {
  @TempDir Path tmp;
  private final TestNodes nodes = new TestNodes(new LoopbackFabric());
  private ShuffleNode reader;
  private Transport rogue;
  /** What the rogue holder does with each request it gets. */
  private volatile Answer answer;
  private final List<CompletableFuture<?>> rogueWrites = new CopyOnWriteArrayList<>();

  interface Answer {
    void answer(PeerQueue q, WriteRequest req, int nth) throws TransportException;
  }

  @BeforeEach
  void start() throws Exception {
    reader = nodes.node(TestNodes.conf("5s"), tmp, "reader");
    rogue = new LoopbackTransportProvider(nodes.fabric()).create(TransportContext.of(ConfigSource.empty(), "localhost",
        "rogue"));
    int[] n = {0};
    rogue.setMessageHandler((from, msg) -> {
      try {
        if (ShuffleMessages.decode(msg) instanceof WriteRequest req) {
          PeerQueue q = rogue.connect(from);
          answer.answer(q, req, n[0]++);
          q.commit();
        }
      } catch (TransportException e) {
        throw new IllegalStateException(e);
      }
    });
  }

  @AfterEach
  void stop() {
    reader.close();
    rogue.close();
  }

  /** The table of {@code req}'s one entry: {@code length} bytes available, checksum {@code sum}. */
  private static ByteBuffer table(WriteRequest req, long length, long sum) {
    return ByteBuffer.wrap(BlockTable.encode(req.requestId(), List.of(new BlockTable.Record(length, sum, 0))));
  }

  /** The signal a holder adds once it wrote {@code written} block bytes of {@code req}, and its table. */
  private static long signal(WriteRequest req, long written) {
    return LandingSignal.of(req.expectedPieces(), written + req.tableBytes());
  }

  private void write(PeerQueue q, RegionDescriptor d, long at, int bytes) {
    rogueWrites.add(q.write(ByteBuffer.allocate(bytes), d.at(at)));
  }

  /** The failure of fetching (and reading) one block of {@code size} bytes: from {@code next()} or from its stream. */
  private BlockFetchException fetchFails(long size) {
    try (BlockFetcher f = reader.newFetcher(3, List.of(new BlockFetcher.HolderPlan("rogue", rogue.localEndpoint(),
        List.of(new BlockFetcher.RemoteBlock(new BlockId(3, 1L, 0), size)))), FetchMetrics.NONE)) {
      Exception e = assertThrows(Exception.class, () -> {
        FetchedBlock b = f.next();
        b.stream().transferTo(java.io.OutputStream.nullOutputStream());
      });
      if (e instanceof BlockFetcher.FetchFailure ff) {
        return ff.getCause();
      }
      return org.junit.jupiter.api.Assertions.assertInstanceOf(BlockFetchException.class, e);
    } finally {
      assertEquals(0, reader.landing().used(), "the range is free after the failure");
      assertEquals(0, reader.pendingRequests());
      assertEquals(0, reader.transport().registeredRegionCount(), "the request's registration is revoked");
    }
  }

  @Test
  void aNegativeLengthFailsTheFetchNamingIt() {
    answer = (q, req, n) -> {
      RegionDescriptor d = req.landing();
      q.writeAndSignal(table(req, -5, 0), d.at(req.tableOffset()), d.at(req.signalOffset()), signal(req, 0));
    };
    BlockFetchException e = fetchFails(100);
    assertEquals("fetching shuffle_3_1_0 from rogue failed: its block table is wrong: it reported a length of -5 bytes,"
        + " expected >= 0", e.getMessage());
    assertEquals(TransportError.MALFORMED, ((TransportException) e.getCause()).error());
  }

  @Test
  void aSignalCountingMorePiecesThanTheRequestHasFailsTheFetch() {
    answer = (q, req, n) -> {
      RegionDescriptor d = req.landing();
      q.writeAndSignal(table(req, 100, 0), d.at(req.tableOffset()), d.at(req.signalOffset()),
          LandingSignal.of(req.expectedPieces() + 4, 100 + req.tableBytes()));
    };
    BlockFetchException e = fetchFails(100);
    assertTrue(e.getMessage().matches("fetching shuffle_3_1_0 from rogue failed: MALFORMED: holder loopback://rogue#\\d+ signalled 6"
        + " pieces for request \\d+, expected 2"), e.getMessage());
  }

  @Test
  void aSignalWhoseBytesDisagreeWithTheTableFailsTheFetch() {
    answer = (q, req, n) -> {
      RegionDescriptor d = req.landing();
      write(q, d, 0, 100);
      q.writeAndSignal(table(req, 100, 0), d.at(req.tableOffset()), d.at(req.signalOffset()), signal(req, 60));
    };
    BlockFetchException e = fetchFails(100);
    assertEquals("fetching shuffle_3_1_0 from rogue failed: its block table is wrong: it reported 100 block bytes"
        + " written, but the signal counted 92 bytes, expected 132 (those and the table's own 32)", e.getMessage());
  }

  @Test
  void aTableWrittenForAnotherRequestNeverCompletesThisOne() {
    answer = (q, req, n) -> {
      RegionDescriptor d = req.landing();
      write(q, d, 0, 100);
      ByteBuffer stale = ByteBuffer.wrap(BlockTable.encode(req.requestId() - 1, List.of(new BlockTable.Record(100, 0,
          0))));
      q.writeAndSignal(stale, d.at(req.tableOffset()), d.at(req.signalOffset()), signal(req, 100));
    };
    BlockFetchException e = fetchFails(100);
    assertTrue(e.getMessage().matches("fetching shuffle_3_1_0 from rogue failed: its block table names request (\\d+)"
        + " with 1 records \\(magic 0x54424c53\\), expected request (\\d+) with 1 records \\(magic 0x54424c53\\):"
        + " not written for this request"), e.getMessage());
    assertEquals(TransportError.MALFORMED, ((TransportException) e.getCause()).error());
  }

  @Test
  void aSignalAnywhereButTheSignalSlotFailsTheFetch() {
    answer = (q, req, n) -> q.signal(req.landing().at(0), 1);
    BlockFetchException e = fetchFails(100);
    assertTrue(e.getMessage().contains("signalled offset 0 of request"), e.getMessage());
    assertTrue(e.getMessage().contains("expected its signal slot at " + (104 + BlockTable.bytes(1))),
        e.getMessage());
  }

  @Test
  void aStreamedBlockWhoseChunksReportDifferentLengthsFailsNamingBoth() {
    // 40 000 bytes in chunks of 16 KiB: the first chunk says 40 000, the second 50 000 - 16 384.
    answer = (q, req, n) -> {
      RegionDescriptor d = req.landing();
      ShuffleMessages.Entry e = req.entries().get(0);
      long total = n == 0 ? 40_000 : 50_000;
      long available = total - e.blockOffset();
      write(q, d, 0, (int) Math.min(available, e.capacity()));
      q.writeAndSignal(table(req, available, 0), d.at(req.tableOffset()), d.at(req.signalOffset()),
          signal(req, Math.min(available, e.capacity())));
    };
    BlockFetchException e = fetchFails(40_000);
    assertEquals("fetching shuffle_3_1_0 from rogue failed: its block table is wrong: it reported 33616 bytes from offset"
        + " 16384 (a length of 50000), expected 23616 (it reported a length of 40000 before)", e.getMessage());
  }

  @Test
  void writesOutsideTheRequestsRangeAreRejectedAndLandNowhere() throws Exception {
    // Another request's range lies right after this one's; the rogue aims past its own range's end.
    LandingPool.Range neighbour = reader.landing().tryAllocate(2 * LandingPool.UNIT);
    answer = (q, req, n) -> {
      RegionDescriptor d = req.landing();
      write(q, d, d.length(), 64); // just past the end
      write(q, d, d.length() - 8, 64); // across the end
      rogueWrites.add(q.writeAndSignal(table(req, 100, 0), d.at(d.length()), d.at(req.signalOffset()),
          signal(req, 100)));
    };
    try (BlockFetcher f = reader.newFetcher(3, List.of(new BlockFetcher.HolderPlan("rogue", rogue.localEndpoint(),
        List.of(new BlockFetcher.RemoteBlock(new BlockId(3, 1L, 0), 100)))), FetchMetrics.NONE)) {
      f.start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (rogueWrites.size() < 3 && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      for (CompletableFuture<?> w : rogueWrites) {
        var e = assertThrows(java.util.concurrent.ExecutionException.class, () -> w.get(10, TimeUnit.SECONDS));
        assertEquals(TransportError.OUT_OF_RANGE, ((TransportException) e.getCause()).error(), e.getMessage());
      }
    }
    ByteBuffer all = neighbour.view(0, neighbour.length());
    for (int i = 0; i < all.limit(); i++) {
      assertEquals(0, all.get(i), "byte " + i + " of the next range");
    }
    neighbour.free();
    assertEquals(0, reader.landing().used());
  }

  @Test
  void aFailedRequestLeaksNoLandingSpaceOverManyAttempts() throws IOException {
    answer = (q, req, n) -> {
      RegionDescriptor d = req.landing();
      q.writeAndSignal(table(req, -1, 0), d.at(req.tableOffset()), d.at(req.signalOffset()), signal(req, 0));
    };
    for (int i = 0; i < 200; i++) {
      fetchFails(1000 + i);
    }
  }
}
