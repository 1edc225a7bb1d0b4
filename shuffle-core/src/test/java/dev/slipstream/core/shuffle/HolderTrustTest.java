package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import dev.slipstream.core.transport.loopback.LoopbackTransportProvider;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a holder serves, and to whom: only its own application, only to the endpoint its peer
 * table holds for the reader a request names, only within the request's time budget, and never
 * pinning map outputs for a reader that stops taking its writes.
 */
class HolderTrustTest {
  @TempDir Path tmp;
  private final TestNodes nodes = new TestNodes(new LoopbackFabric());
  private ShuffleNode holder;
  private ShuffleNode reader;
  /** A process of the same fabric that is in no peer table. */
  private Transport stranger;
  private final AtomicInteger strangerMessages = new AtomicInteger();

  private static Map<String, String> conf(String fetchTimeout) {
    return TestNodes.conf(fetchTimeout);
  }

  @BeforeEach
  void start() throws Exception {
    holder = nodes.node(conf("5s"), tmp, "holder");
    reader = nodes.node(conf("5s"), tmp, "reader");
    stranger = new LoopbackTransportProvider(nodes.fabric()).create(TransportContext.of(ConfigSource.empty(),
        "localhost", "stranger"));
    stranger.setMessageHandler((from, m) -> strangerMessages.incrementAndGet());
    LateWriteTest.write(holder, 4, 1L, 4);
  }

  @AfterEach
  void stop() {
    stranger.close();
    reader.close();
    holder.close();
  }

  /** A request for shuffle 4 map 1's block into {@code landing}, as {@code who} asks. */
  private static WriteRequest request(NodeIdentity who, long budgetMillis, RegisteredRegion landing) {
    return new WriteRequest(99, 4, who, budgetMillis, landing.descriptor(), 4096, 4096 + BlockTable.bytes(1),
        List.of(new ShuffleMessages.Entry(1L, 0, 0, LateWriteTest.SIZE, 0)));
  }

  private static void await(LongSupplier counter, long atLeast) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (counter.getAsLong() < atLeast && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    assertEquals(atLeast, counter.getAsLong());
  }

  private static void assertUntouched(RegisteredRegion r) {
    ByteBuffer b = r.buffer();
    for (int i = 0; i < b.limit(); i++) {
      assertEquals(0, b.get(i), "byte " + i + " of " + r.descriptor());
    }
  }

  @Test
  void aStrangerClaimingAnExecutorGetsNothingWrittenToItsOwnMemory() throws Exception {
    // Before, a holder wrote to whichever endpoint the connection claimed: any process could have
    // any block written into memory of its own by naming it in a request.
    RegisteredRegion own = stranger.register(ByteBuffer.allocateDirect(8192));
    stranger.connect(holder.localEndpoint()).send(request(new NodeIdentity(TestNodes.APP, "reader"), 5000, own)
        .encode()).get(10, TimeUnit.SECONDS);
    await(holder::requestsRefused, 1);
    assertUntouched(own);
    assertEquals(0, strangerMessages.get(), "nothing was answered to the stranger");
    assertEquals(0, holder.requestsServed());
    assertEquals(0, stranger.metrics().writesReceived());
  }

  @Test
  void anExecutorThePeerTableDoesNotKnowIsRefused() throws Exception {
    RegisteredRegion own = stranger.register(ByteBuffer.allocateDirect(8192));
    stranger.connect(holder.localEndpoint()).send(request(new NodeIdentity(TestNodes.APP, "stranger"), 5000, own)
        .encode()).get(10, TimeUnit.SECONDS);
    await(holder::requestsRefused, 1);
    assertUntouched(own);
    assertEquals(0, strangerMessages.get());
  }

  @Test
  void anotherApplicationsRequestIsRefusedEvenFromAKnownEndpoint() throws Exception {
    // A stale peer entry or a reused port: the request reaches an executor of another application.
    RegisteredRegion landing = reader.transport().register(ByteBuffer.allocateDirect(8192));
    reader.transport().connect(holder.localEndpoint()).send(request(new NodeIdentity("another-app", "reader"), 5000,
        landing).encode()).get(10, TimeUnit.SECONDS);
    await(holder::requestsRefused, 1);
    assertUntouched(landing);
    assertEquals(0, holder.requestsServed());
    landing.close();
  }

  @Test
  void aKnownReadersRequestIsServedAtTheEndpointThePeerTableHolds() throws Exception {
    RegisteredRegion landing = reader.transport().register(ByteBuffer.allocateDirect(8192));
    reader.transport().connect(holder.localEndpoint()).send(request(new NodeIdentity(TestNodes.APP, "reader"), 5000,
        landing).encode()).get(10, TimeUnit.SECONDS);
    await(holder::requestsServed, 1);
    WriteRequest sent = request(new NodeIdentity(TestNodes.APP, "reader"), 5000, landing);
    assertEquals(LandingSignal.of(sent.expectedPieces(), LateWriteTest.SIZE + sent.tableBytes()),
        landing.readSignal(4096 + BlockTable.bytes(1)), "the control case: written and signalled");
    assertEquals(0, holder.requestsRefused());
    landing.close();
  }

  @Test
  void aReaderWithAStalePeerEntryGetsAFetchFailureNeverAnotherApplicationsBlock() throws Exception {
    // The reader's table still places executor "holder" at a port that an executor of another
    // application now listens on, and that executor has a map output of the same shuffle and map id.
    TestNodes other = new TestNodes("tcp", "another-app");
    TestNodes mine = new TestNodes("tcp");
    try (ShuffleNode foreign = other.node(conf("1s"), tmp, "holder");
         ShuffleNode reader = mine.node(conf("1s"), tmp, "reader")) {
      LateWriteTest.write(foreign, 4, 1L, 99);
      try (BlockFetcher f = reader.newFetcher(4, List.of(new BlockFetcher.HolderPlan("holder", foreign.localEndpoint(),
          List.of(new BlockFetcher.RemoteBlock(new BlockId(4, 1L, 0), LateWriteTest.SIZE)))), FetchMetrics.NONE)) {
        assertThrows(BlockFetcher.FetchFailure.class, f::next);
      }
      assertEquals(0, foreign.requestsServed(), "another application's block was never written");
      assertEquals(0, reader.transport().metrics().writesReceived());
      assertEquals(0, reader.landing().used());
    }
  }

  @Test
  void aRequestPastItsTimeBudgetIsDroppedWithNothingWritten() throws Exception {
    RegisteredRegion landing = reader.transport().register(ByteBuffer.allocateDirect(8192));
    reader.transport().connect(holder.localEndpoint()).send(request(new NodeIdentity(TestNodes.APP, "reader"), 0,
        landing).encode()).get(10, TimeUnit.SECONDS);
    await(holder::serveFailures, 1);
    assertUntouched(landing);
    assertEquals(0, holder.requestsServed());
    landing.close();
  }

  @Test
  void writesAReaderNeverTakesCloseItsConnectionAndReleaseTheOutputs() throws Exception {
    // A reader that hangs with its connection open: its holder's writes never complete. They now
    // time out (the fetch timeout), the connection closes, and the map output is freed once its
    // shuffle is removed.
    try (ShuffleNode stuck = nodes.node(conf("300ms"), tmp, "stuck",
             t -> new DelayingTransport(t, () -> new DelayingTransport.Plan(DelayingTransport.FOREVER, 0)));
         ShuffleNode impatient = nodes.node(conf("300ms"), tmp, "impatient")) {
      LateWriteTest.write(stuck, 6, 1L, 6);
      try (BlockFetcher f = impatient.newFetcher(6, List.of(new BlockFetcher.HolderPlan("stuck", stuck.localEndpoint(),
          List.of(new BlockFetcher.RemoteBlock(new BlockId(6, 1L, 0), LateWriteTest.SIZE)))),
          FetchMetrics.NONE)) {
        BlockFetcher.FetchFailure e = assertThrows(BlockFetcher.FetchFailure.class, f::next);
        assertEquals(TransportError.TIMEOUT, ((TransportException) e.getCause().getCause()).error());
      }
      await(stuck::writesTimedOut, 1);
      stuck.removeShuffle(6);
      await(() -> stuck.store().memoryInUse() == 0 ? 1 : 0, 1);
      assertEquals(0, stuck.store().outputCount());
    }
  }
}
