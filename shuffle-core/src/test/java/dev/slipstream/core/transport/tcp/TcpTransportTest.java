package dev.slipstream.core.transport.tcp;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.bytes;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.failure;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.filled;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.frames;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.Transports;
import dev.slipstream.core.transport.tcp.TcpFrame.Ack;
import dev.slipstream.core.transport.tcp.TcpFrame.ErrorReply;
import dev.slipstream.core.transport.tcp.TcpHandshake.Hello;
import dev.slipstream.core.transport.tcp.TcpFrame.Target;
import dev.slipstream.core.transport.tcp.TcpFrame.Write;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.util.ReferenceCountUtil;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Behaviour specific to tcp: the wire as seen by raw sockets, frame splitting, dead peers, threads. */
class TcpTransportTest {
  private final List<AutoCloseable> resources = new ArrayList<>();

  @AfterEach
  void closeAll() throws Exception {
    for (int i = resources.size() - 1; i >= 0; i--) {
      resources.get(i).close();
    }
  }

  private Transport tcp(String name, Map<String, String> config) throws Exception {
    Transport t = new TcpTransportProvider().create(TransportContext.of(ConfigSource.of(config), "127.0.0.1", name));
    resources.add(t);
    return t;
  }

  private static ByteBuffer pattern(int n) {
    ByteBuffer b = ByteBuffer.allocateDirect(n);
    for (int i = 0; i < n; i++) {
      b.put(i, (byte) (i * 31 + (i >>> 9) + 1));
    }
    return b;
  }

  private Socket rawClient(Transport t) throws IOException {
    Socket s = TcpTestSupport.rawClient(t);
    resources.add(s);
    return s;
  }

  // ---------------------------------------------------------------- discovery and endpoint

  @Test
  void providerIsFoundByServiceLoaderAndAvailable() {
    Transports all = Transports.load(null);
    assertTrue(all.names().contains("tcp"), "providers: " + all.names());
    assertTrue(all.names().contains("loopback"), "providers: " + all.names());
    assertTrue(all.get("tcp").probe().available());
  }

  @Test
  void endpointIsAdvertisedHostAndBoundPort() throws Exception {
    Transport t = tcp("ep", Map.of());
    EndpointDescriptor e = t.localEndpoint();
    assertEquals("tcp", e.transport());
    assertEquals(0, e.extra().length);
    TcpAddress a = TcpAddress.parse(e.address());
    assertEquals("127.0.0.1", a.host());
    assertTrue(a.port() > 0, "ephemeral port bound: " + e);
    assertEquals(e, EndpointDescriptor.fromBytes(e.toBytes()));
  }

  @Test
  void rejectsBadConfigurationNamingTheKey() {
    TransportContext ctx = TransportContext.of(ConfigSource.of(Map.of("spark.slipstream.tcp.maxFrameBytes", "4x")),
        "127.0.0.1", "cfg");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new TcpTransportProvider().create(ctx));
    assertTrue(e.getMessage().contains("spark.slipstream.tcp.maxFrameBytes"), e.getMessage());
  }

  @Test
  void connectRejectsForeignAndMalformedEndpoints() throws Exception {
    Transport t = tcp("c", Map.of());
    TransportException e = assertThrows(TransportException.class,
        () -> t.connect(new EndpointDescriptor("loopback", "x#1", null)));
    assertEquals(TransportError.MALFORMED, e.error());
    assertTrue(e.getMessage().contains("'loopback'") && e.getMessage().contains("expected 'tcp'"), e.getMessage());
    e = assertThrows(TransportException.class, () -> t.connect(new EndpointDescriptor("tcp", "no-port", null)));
    assertEquals(TransportError.MALFORMED, e.error());
    assertTrue(e.getMessage().contains("'no-port'"), e.getMessage());
  }

  @Test
  void registerRejectsHeapMemory() throws Exception {
    Transport t = tcp("h", Map.of());
    TransportException e = assertThrows(TransportException.class, () -> t.register(ByteBuffer.allocate(64)));
    assertTrue(e.getMessage().contains("direct"), e.getMessage());
  }

  // ---------------------------------------------------------------- frames on the wire

  @Test
  void rawClientWriteIsAppliedAndAcked() throws Exception {
    Transport t = tcp("raw", Map.of());
    RegisteredRegion r = filled(t, 256);
    RegionDescriptor d = r.descriptor();
    Socket s = rawClient(t);
    OutputStream out = s.getOutputStream();
    out.write(ReceiverHarness.encode(new Hello(new EndpointDescriptor("tcp", "raw:1", null))));
    out.write(ReceiverHarness.encode(new Write(77, new Target(d.id(), d.key(), 8), 4, 0,
        Unpooled.wrappedBuffer(new byte[] {1, 2, 3, 4}))));
    s.shutdownOutput(); // the receiver answers what it got, then closes

    assertEquals(List.of(new Ack(77, 0)), frames(s.getInputStream().readAllBytes()));
    assertArrayEquals(new byte[] {1, 2, 3, 4}, Arrays.copyOfRange(bytes(r), 8, 12));
  }

  @Test
  void undecodableFrameGetsAnErrorNamingGotAndExpectedThenTheConnectionCloses() throws Exception {
    Transport t = tcp("raw", Map.of());
    RegisteredRegion r = filled(t, 256);
    byte[] before = bytes(r);
    Socket s = rawClient(t);
    s.getOutputStream().write(new byte[] {0, 0, 0, 60, 'X', 'Y', 1, 0x11});

    List<TcpFrame> reply = frames(s.getInputStream().readAllBytes()); // returns at the receiver's close
    assertEquals(1, reply.size(), reply.toString());
    ErrorReply e = assertInstanceOf(ErrorReply.class, reply.get(0));
    assertEquals(0, e.seq());
    assertEquals(TransportError.BAD_VERSION.code(), e.code());
    assertTrue(e.message().contains("got magic 0x5859") && e.message().contains("expected 0x534c"), e.message());
    assertArrayEquals(before, bytes(r));
    assertEquals(1, t.metrics().rejected());
  }

  @Test
  void frameCutShortByTheSenderIsReportedAndNothingIsWritten() throws Exception {
    Transport t = tcp("raw", Map.of());
    RegisteredRegion r = filled(t, 256);
    RegionDescriptor d = r.descriptor();
    byte[] before = bytes(r);
    Socket s = rawClient(t);
    OutputStream out = s.getOutputStream();
    out.write(ReceiverHarness.encode(new Hello(new EndpointDescriptor("tcp", "raw:1", null))));
    byte[] write = ReceiverHarness.encode(new Write(5, new Target(d.id(), d.key(), 0), 100, 0,
        Unpooled.wrappedBuffer(new byte[100])));
    out.write(write, 0, 70);
    s.shutdownOutput();

    List<TcpFrame> reply = frames(s.getInputStream().readAllBytes());
    ErrorReply e = assertInstanceOf(ErrorReply.class, reply.get(0));
    assertEquals(1, reply.size());
    assertEquals(TransportError.MALFORMED.code(), e.code());
    assertTrue(e.message().contains("got 70 bytes, expected " + write.length), e.message());
    assertArrayEquals(before, bytes(r));
  }

  // ---------------------------------------------------------------- splitting into frames

  @Test
  void writeLargerThanAFrameIsSplitAndItsSignalFollowsTheLastPart() throws Exception {
    Map<String, String> small = Map.of("spark.slipstream.tcp.maxFrameBytes", "1k");
    Transport a = tcp("a", small);
    Transport b = tcp("b", small);
    int size = 100_000; // about 110 frames
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(size + 8));
    ByteBuffer src = pattern(size);
    CompletableFuture<Boolean> dataCompleteAtSignal = new CompletableFuture<>();
    r.setSignalListener((region, off, v) ->
        dataCompleteAtSignal.complete(region.buffer().slice(8, size).compareTo(src) == 0));

    a.connect(b.localEndpoint()).writeAndSignal(src, r.descriptor().at(8), r.descriptor().at(0), 1).get(30, SECONDS);

    assertTrue(dataCompleteAtSignal.get(30, SECONDS), "all parts were in place when the signal was seen");
    assertEquals(1, r.readSignal(0));
    assertEquals(size, b.metrics().bytesReceived());
    assertEquals(1, b.metrics().writesReceived(), "one write, however many frames");
  }

  @Test
  void rejectedMultiFrameWriteWritesNoPartAndFailsOnce() throws Exception {
    Map<String, String> small = Map.of("spark.slipstream.tcp.maxFrameBytes", "1k");
    Transport a = tcp("a", small);
    Transport b = tcp("b", small);
    RegisteredRegion r = filled(b, 8192);
    byte[] before = bytes(r);
    RegionDescriptor d = r.descriptor();
    RegionDescriptor claimsMore = new RegionDescriptor(d.id(), 0, 1 << 20, d.key(), MemoryKind.HOST, -1);
    PeerQueue q = a.connect(b.localEndpoint());

    TransportException e = failure(q.write(pattern(16_384), claimsMore.at(0))); // 17 parts, the region holds 8
    assertEquals(TransportError.OUT_OF_RANGE, e.error());
    assertArrayEquals(before, bytes(r), "no part of a rejected write may land");
    assertEquals(1, b.metrics().rejected(), "one rejection for the whole write");
    q.write(pattern(16), d.at(0)).get(30, SECONDS); // the connection is still good
  }

  @Test
  void sendLargerThanAFrameFailsAtTheSender() throws Exception {
    Transport a = tcp("a", Map.of("spark.slipstream.tcp.maxFrameBytes", "1k"));
    Transport b = tcp("b", Map.of());
    TransportException e = failure(a.connect(b.localEndpoint()).send(ByteBuffer.allocate(2000)));
    assertEquals(TransportError.MALFORMED, e.error());
    assertTrue(e.getMessage().contains("2000"), e.getMessage());
  }

  // ---------------------------------------------------------------- dead and hostile peers

  private ServerSocket rawServer() throws IOException {
    ServerSocket ss = new ServerSocket(0, 8, InetAddress.getLoopbackAddress());
    resources.add(ss);
    return ss;
  }

  private static EndpointDescriptor endpointOf(ServerSocket ss) {
    return new EndpointDescriptor("tcp", "127.0.0.1:" + ss.getLocalPort(), null);
  }

  @Test
  void outstandingOperationsFailWithPeerLostWhenThePeerDiesWithoutAnswering() throws Exception {
    Transport a = tcp("a", Map.of());
    ServerSocket ss = rawServer();
    RegionDescriptor somewhere = RegionDescriptor.host(1, 1 << 20, 2);
    PeerQueue q = a.connect(endpointOf(ss));
    List<CompletableFuture<?>> fs = List.of(q.write(pattern(300_000), somewhere.at(0)),
        q.signal(somewhere.at(0), 1), q.fetchAdd(somewhere.at(8), 1), q.send(pattern(10)));
    try (Socket peer = ss.accept()) {
      assertTrue(peer.getInputStream().read() >= 0, "the queue connected and sent its HELLO");
    } // the peer dies with every operation unanswered

    for (CompletableFuture<?> f : fs) {
      TransportException e = failure(f);
      assertEquals(TransportError.PEER_LOST, e.error(), e.getMessage());
      assertTrue(e.getMessage().contains(endpointOf(ss).toString()), e.getMessage());
    }
    assertFalse(q.isOpen());
    assertEquals(4, a.metrics().failed());
  }

  @Test
  void connectionErrorFromThePeerFailsEveryOperationWithItsCode() throws Exception {
    Transport a = tcp("a", Map.of());
    ServerSocket ss = rawServer();
    RegionDescriptor somewhere = RegionDescriptor.host(1, 4096, 2);
    PeerQueue q = a.connect(endpointOf(ss));
    List<CompletableFuture<?>> fs = List.of(q.write(pattern(10), somewhere.at(0)), q.signal(somewhere.at(0), 1));
    try (Socket peer = ss.accept()) {
      InputStream in = peer.getInputStream();
      assertTrue(in.read() >= 0);
      peer.getOutputStream().write(ReceiverHarness.encode(new ErrorReply(0, TransportError.BAD_VERSION.code(), "got version 1, expected 9")));
      peer.getOutputStream().flush();
      assertEquals(-1, drain(in), "the sender closes after a connection error");
    }
    for (CompletableFuture<?> f : fs) {
      TransportException e = failure(f);
      assertEquals(TransportError.BAD_VERSION, e.error());
      assertTrue(e.getMessage().contains("got version 1, expected 9"), e.getMessage());
    }
  }

  private static int drain(InputStream in) throws IOException {
    int last;
    while ((last = in.read()) >= 0) {
      // skip what the sender had sent
    }
    return last;
  }

  @Test
  void unreachablePeerFailsOperationsAndConnectReplacesTheDeadQueue() throws Exception {
    Transport a = tcp("a", Map.of());
    int port;
    try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = probe.getLocalPort(); // free once closed: nothing listens there now
    }
    EndpointDescriptor peer = new EndpointDescriptor("tcp", "127.0.0.1:" + port, null);
    PeerQueue q = a.connect(peer);
    TransportException e = failure(q.write(pattern(10), RegionDescriptor.host(1, 64, 2).at(0)));
    assertEquals(TransportError.PEER_LOST, e.error());
    assertTrue(e.getMessage().contains("cannot connect to " + peer), e.getMessage());
    assertFalse(q.isOpen());

    Transport b = tcp("b", Map.of("spark.slipstream.tcp.port", String.valueOf(port)));
    assertEquals(peer, b.localEndpoint());
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(64));
    PeerQueue fresh = a.connect(peer);
    assertNotSame(q, fresh);
    fresh.write(pattern(10), r.descriptor().at(0)).get(30, SECONDS);
  }

  @Test
  void hostNamesAreLookedUpOffTheEventLoopWhichKeepsServingMeanwhile() throws Exception {
    Transport b = tcp("b", Map.of());
    RegisteredRegion r = filled(b, 64);
    CountDownLatch release = new CountDownLatch(1);
    List<String> lookups = new CopyOnWriteArrayList<>();
    Map<String, String> oneLoop = Map.of("spark.slipstream.tcp.ioThreads", "1");
    TcpTransport a = new TcpTransport(TransportContext.of(ConfigSource.of(oneLoop), "127.0.0.1", "a"),
        new TcpConfig(ConfigSource.of(oneLoop)), host -> {
          lookups.add(host + " on " + Thread.currentThread().getName());
          try {
            release.await(30, SECONDS); // a slow DNS server
          } catch (InterruptedException e) {
            throw new java.net.UnknownHostException("interrupted");
          }
          return new InetAddress[] {InetAddress.getLoopbackAddress()};
        });
    resources.add(a);
    EndpointDescriptor byName = new EndpointDescriptor("tcp",
        "slow-dns.test:" + TcpAddress.parse(b.localEndpoint().address()).port(), null);
    // The handler runs on a's only event loop: it connects by host name from there.
    CompletableFuture<CompletableFuture<Void>> slowWrite = new CompletableFuture<>();
    CompletableFuture<Void> secondMessage = new CompletableFuture<>();
    a.setMessageHandler((from, msg) -> {
      if (msg.get(0) == 1) {
        try {
          slowWrite.complete(a.connect(byName).write(ByteBuffer.wrap(new byte[] {4, 2}), r.descriptor().at(0)));
        } catch (TransportException e) {
          slowWrite.completeExceptionally(e);
        }
      } else {
        secondMessage.complete(null);
      }
    });
    PeerQueue toA = b.connect(a.localEndpoint());
    toA.send(ByteBuffer.wrap(new byte[] {1})).get(30, SECONDS);
    CompletableFuture<Void> w = slowWrite.get(30, SECONDS);

    toA.send(ByteBuffer.wrap(new byte[] {2})).get(30, SECONDS);
    secondMessage.get(30, SECONDS); // the event loop serves while the lookup is stuck
    assertFalse(w.isDone(), "the write waits for its peer's address");
    release.countDown();
    w.get(30, SECONDS);
    assertArrayEquals(new byte[] {4, 2}, Arrays.copyOf(bytes(r), 2));
    assertEquals(1, lookups.size(), lookups.toString());
    assertTrue(lookups.get(0).startsWith("slow-dns.test on slipstream-tcp-resolve-a"), lookups.toString());

    a.connect(b.localEndpoint()).write(pattern(4), r.descriptor().at(8)).get(30, SECONDS);
    assertEquals(1, lookups.size(), "an IP literal is never looked up: " + lookups);
  }

  @Test
  void queuesToDeadPeersLeaveTheCache() throws Exception {
    TcpTransport a = (TcpTransport) tcp("a", Map.of());
    List<CompletableFuture<Void>> writes = new ArrayList<>();
    List<EndpointDescriptor> dead = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
        dead.add(new EndpointDescriptor("tcp", "127.0.0.1:" + probe.getLocalPort(), null)); // nothing listens once closed
      }
    }
    for (EndpointDescriptor peer : dead) {
      writes.add(a.connect(peer).write(pattern(10), RegionDescriptor.host(1, 64, 2).at(0)));
    }
    for (CompletableFuture<Void> w : writes) {
      assertEquals(TransportError.PEER_LOST, failure(w).error());
    }
    for (int i = 0; i < 20; i++) { // one dead peer, again and again
      assertEquals(TransportError.PEER_LOST,
          failure(a.connect(dead.get(0)).write(pattern(10), RegionDescriptor.host(1, 64, 2).at(0))).error());
    }
    long deadline = System.nanoTime() + SECONDS.toNanos(30);
    while (a.cachedQueueCount() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(0, a.cachedQueueCount(), "queues whose connection failed stay cached");
  }

  // ---------------------------------------------------------------- lifecycle

  @Test
  void closeStopsEveryThreadItStarted() throws Exception {
    String name = "threads-" + System.nanoTime();
    Transport a = new TcpTransportProvider().create(TransportContext.of(ConfigSource.empty(), "127.0.0.1", name));
    Transport b = tcp("b", Map.of());
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(64));
    a.register(ByteBuffer.allocateDirect(64));
    a.connect(b.localEndpoint()).write(pattern(10), r.descriptor().at(0)).get(30, SECONDS);
    List<Thread> started = Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().startsWith("slipstream-tcp-" + name)).toList();
    assertFalse(started.isEmpty(), "the transport's event-loop threads are named after its process");

    a.close();

    for (Thread t : started) {
      t.join(10_000);
      assertFalse(t.isAlive(), t.getName() + " outlived close()");
    }
    assertEquals(0, a.registeredRegionCount());
  }
}
