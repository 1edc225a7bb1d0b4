package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RemoteAddress;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A connection that dies under a request (its peer closed it as idle at that moment, or it broke)
 * costs a second try on a fresh connection, not a fetch failure: on the reader for the request
 * message, on the holder for its writes.
 */
class ConnectionLossTest {
  @TempDir Path tmp;

  /** A transport whose first queue fails every operation with PEER_LOST, as a connection dying at once. */
  private static final class FirstConnectionDies extends ForwardingTransport {
    private final AtomicBoolean died = new AtomicBoolean();

    FirstConnectionDies(Transport inner) {
      super(inner);
    }

    @Override
    public PeerQueue connect(EndpointDescriptor peer) throws TransportException {
      PeerQueue q = inner.connect(peer);
      if (died.get()) {
        return q;
      }
      return new PeerQueue() {
        private <T> CompletableFuture<T> lost() {
          died.set(true);
          return CompletableFuture.failedFuture(new TransportException(TransportError.PEER_LOST,
              "connection to " + peer + " closed by its peer"));
        }

        @Override public EndpointDescriptor peer() { return q.peer(); }
        @Override public CompletableFuture<Void> write(ByteBuffer src, RemoteAddress dst) { return lost(); }
        @Override public CompletableFuture<Void> writeAndSignal(ByteBuffer s, RemoteAddress d, RemoteAddress g, long x) {
          return lost();
        }
        @Override public CompletableFuture<Void> signal(RemoteAddress s, long d) { return lost(); }
        @Override public CompletableFuture<Long> fetchAdd(RemoteAddress d, long x) { return lost(); }
        @Override public CompletableFuture<Void> send(ByteBuffer m) { return lost(); }
        @Override public void commit() {}
        @Override public boolean isOpen() { return !died.get(); }
        @Override public void close() {}
      };
    }
  }

  private static Map<String, String> conf() {
    return TestNodes.conf("5s");
  }

  private byte[] fetch(ShuffleNode reader, ShuffleNode holder) throws IOException {
    try (BlockFetcher f = reader.newFetcher(4, List.of(new BlockFetcher.HolderPlan("holder", holder.localEndpoint(),
        List.of(new BlockFetcher.RemoteBlock(new BlockId(4, 1L, 0), LateWriteTest.SIZE)))), FetchMetrics.NONE)) {
      return LateWriteTest.readAll(f.next().stream());
    }
  }

  @Test
  void aRequestWhoseConnectionDiesIsSentOnceMoreAndServed() throws Exception {
    TestNodes nodes = new TestNodes(new LoopbackFabric());
    try (ShuffleNode holder = nodes.node(conf(), tmp, "holder");
         ShuffleNode reader = nodes.node(conf(), tmp, "reader", FirstConnectionDies::new)) {
      byte[] data = LateWriteTest.write(holder, 4, 1L, 4);
      assertArrayEquals(data, fetch(reader, holder));
      assertEquals(0, reader.requestsFailed());
    }
  }

  @Test
  void writesWhoseConnectionDiesArePostedOnceMoreAndLand() throws Exception {
    TestNodes nodes = new TestNodes(new LoopbackFabric());
    try (ShuffleNode holder = nodes.node(conf(), tmp, "holder", FirstConnectionDies::new);
         ShuffleNode reader = nodes.node(conf(), tmp, "reader")) {
      byte[] data = LateWriteTest.write(holder, 4, 1L, 4);
      assertArrayEquals(data, fetch(reader, holder));
      assertEquals(1, holder.writesRetried());
      assertEquals(0, holder.serveFailures());
    }
  }
}
