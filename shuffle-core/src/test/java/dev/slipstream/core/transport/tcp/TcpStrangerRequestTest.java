package dev.slipstream.core.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.shuffle.MapOutputWriter;
import dev.slipstream.core.shuffle.NodeIdentity;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleNode;
import dev.slipstream.core.shuffle.TestNodes;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.tcp.TcpFrame.Send;
import dev.slipstream.core.transport.tcp.TcpHandshake.Hello;
import io.netty.buffer.Unpooled;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A process that is not an executor of the application connects to a holder's tcp port with a
 * raw socket, claims an endpoint and an executor id in its HELLO (no authentication) and sends a
 * write request for a block the holder has. The holder writes nothing to the endpoint the
 * connection claims; where the claim names a real executor's endpoint, the writes go to that
 * executor, which rejects them (the stranger cannot know a key it registered), and nothing lands.
 */
class TcpStrangerRequestTest {
  @TempDir Path tmp;

  private static Map<String, String> conf() {
    return TestNodes.conf("5s");
  }

  private static void await(LongSupplier counter, long expected, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (counter.getAsLong() < expected && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(expected, counter.getAsLong(), what);
  }

  /** HELLO claiming {@code claimed} as executor "reader" of the test application, then a write request for shuffle 4 map 1. */
  private static byte[] claimAndAsk(EndpointDescriptor claimed) {
    ByteBuffer req = new ShuffleMessages.WriteRequest(7, 4, new NodeIdentity(TestNodes.APP, "reader"), 5000,
        RegionDescriptor.host(1, 64 * 1024, 0x0123456789abcdefL), 16 * 1024, 16 * 1024 + 32,
        List.of(new ShuffleMessages.Entry(1L, 0, 0, 4096, 0))).encode();
    return TcpTestSupport.concat(new Hello(new PeerIdentity(claimed, TestNodes.APP, "reader")),
        new Send(1, Unpooled.wrappedBuffer(req)));
  }

  private static ShuffleNode holderWithABlock(TestNodes nodes, Path tmp) throws Exception {
    ShuffleNode holder = nodes.node(conf(), tmp, "holder");
    MapOutputWriter w = holder.store().newOutput(4, 1L, 1);
    try (OutputStream o = w.openPartition(0)) {
      o.write(new byte[4096]);
    }
    w.commit();
    return holder;
  }

  @Test
  void aStrangerClaimingItsOwnListenerAsAnExecutorsEndpointGetsNoConnectionAndNoBlock() throws Exception {
    TestNodes nodes = new TestNodes("tcp");
    try (ShuffleNode holder = holderWithABlock(nodes, tmp);
         ShuffleNode reader = nodes.node(conf(), tmp, "reader");
         ServerSocket strangersListener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      AtomicInteger accepted = new AtomicInteger();
      strangersListener.setSoTimeout(200);
      Thread acceptor = new Thread(() -> {
        while (!strangersListener.isClosed()) {
          try (Socket s = strangersListener.accept()) {
            accepted.incrementAndGet();
          } catch (SocketTimeoutException e) {
            // keep listening
          } catch (java.io.IOException e) {
            return;
          }
        }
      });
      acceptor.start();
      EndpointDescriptor claimed = new EndpointDescriptor("tcp", "127.0.0.1:" + strangersListener.getLocalPort(), null);
      try (Socket s = TcpTestSupport.rawClient(holder.transport())) {
        s.getOutputStream().write(claimAndAsk(claimed));
        await(holder::requestsRefused, 1, "requests refused");
      }
      Thread.sleep(500); // what the holder would have written would be on its way by now
      strangersListener.close();
      acceptor.join(5000);
      assertEquals(0, accepted.get(), "the holder connected to the stranger's listener");
      assertEquals(0, holder.requestsServed());
      assertEquals(0, holder.transport().metrics().bytesWritten(), "the holder wrote nothing anywhere");
      assertEquals(0, reader.transport().metrics().writesReceived());
    }
  }

  @Test
  void aStrangerClaimingARealExecutorsEndpointHasItsForgedWritesRejectedThere() throws Exception {
    TestNodes nodes = new TestNodes("tcp");
    try (ShuffleNode holder = holderWithABlock(nodes, tmp);
         ShuffleNode reader = nodes.node(conf(), tmp, "reader")) {
      try (Socket s = TcpTestSupport.rawClient(holder.transport())) {
        s.getOutputStream().write(claimAndAsk(reader.localEndpoint()));
        await(holder::serveFailures, 1, "the holder's writes failed at the reader");
      }
      assertEquals(0, holder.requestsServed());
      assertEquals(0, reader.transport().metrics().writesReceived(), "nothing landed at the reader");
      assertTrue(reader.transport().metrics().rejected() >= 1, "the reader rejected the writes");
      assertEquals(0, reader.landing().used());
    }
  }
}
