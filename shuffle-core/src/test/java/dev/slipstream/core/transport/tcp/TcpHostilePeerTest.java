package dev.slipstream.core.transport.tcp;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.bytes;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.failure;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.concat;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.frames;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.intrusion;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MessageHandler;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.tcp.TcpFrame.Ack;
import dev.slipstream.core.transport.tcp.TcpFrame.ErrorReply;
import dev.slipstream.core.transport.tcp.TcpFrame.FetchAdd;
import dev.slipstream.core.transport.tcp.TcpFrame.Target;
import dev.slipstream.core.transport.tcp.TcpFrame.Write;
import dev.slipstream.core.transport.tcp.TcpHandshake.AuthHello;
import dev.slipstream.core.transport.tcp.TcpHandshake.AuthProof;
import dev.slipstream.core.transport.tcp.TcpHandshake.AuthChallenge;
import dev.slipstream.core.transport.tcp.TcpHandshake.Hello;
import io.netty.buffer.Unpooled;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Hostile or broken peers cost a tcp receiver bounded memory and time, with nothing written: a
 * HELLO of another application, frames larger than any HELLO before it, no HELLO at all, an idle
 * connection, one connection too many, a client that never reads its replies. Each test talks to
 * the transport through a raw socket, checks the bound, and checks that no region byte changed and
 * nothing was delivered.
 */
class TcpHostilePeerTest {
  static final String APP = "app-20261201-0001";
  private static final EndpointDescriptor RAW = new EndpointDescriptor("tcp", "raw-client:1", null);

  private final List<AutoCloseable> resources = new ArrayList<>();
  private final ConcurrentLinkedQueue<PeerIdentity> messagesFrom = new ConcurrentLinkedQueue<>();

  @AfterEach
  void closeAll() throws Exception {
    for (int i = resources.size() - 1; i >= 0; i--) {
      resources.get(i).close();
    }
  }

  private Transport tcp(String executor, String app, Map<String, String> config) throws Exception {
    Transport t = new TcpTransportProvider().create(new TransportContext(ConfigSource.of(config), "127.0.0.1",
        "executor-" + executor, Optional.empty(), app, executor));
    t.setMessageHandler(MessageHandler.identified((from, msg) -> messagesFrom.add(from)));
    resources.add(t);
    return t;
  }

  private Socket rawClient(Transport t) throws IOException {
    Socket s = TcpTestSupport.rawClient(t);
    resources.add(s);
    return s;
  }


  private static byte[] filledBytes(int n) {
    byte[] b = new byte[n];
    Arrays.fill(b, (byte) 0x5a);
    return b;
  }

  /** The whole rest of the receiver's answer is one ERROR(0, {@code code}) saying {@code inMessage}; then it closes. */
  private static ErrorReply assertRefused(Socket s, TransportError code, String... inMessage) throws Exception {
    List<TcpFrame> got = frames(s.getInputStream().readAllBytes()); // returns at the receiver's close
    assertEquals(1, got.size(), "replies: " + got);
    ErrorReply e = assertInstanceOf(ErrorReply.class, got.get(0));
    assertEquals(0, e.seq());
    assertEquals(code.code(), e.code(), e.message());
    for (String part : inMessage) {
      assertTrue(e.message().contains(part), "message '" + e.message() + "' should say " + part);
    }
    return e;
  }

  private void assertNothingHappened(Transport server, RegisteredRegion r) {
    assertArrayEquals(filledBytes(bytes(r).length), bytes(r), "region bytes changed");
    assertTrue(messagesFrom.isEmpty(), "messages delivered: " + messagesFrom);
    assertEquals(0, server.metrics().writesReceived() + server.metrics().messagesReceived());
  }

  private static TcpFrame readFrame(Socket s) throws IOException, TransportException {
    java.io.DataInputStream in = new java.io.DataInputStream(s.getInputStream());
    int length = in.readInt();
    byte[] b = new byte[length];
    ByteBuffer.wrap(b).putInt(length);
    in.readFully(b, 4, length - 4);
    return frames(b).get(0);
  }

  private static void awaitCount(LongSupplier counter, long expected, String what) throws InterruptedException {
    long deadline = System.nanoTime() + SECONDS.toNanos(30);
    while (counter.getAsLong() != expected) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError(what + ": got " + counter.getAsLong() + ", expected " + expected);
      }
      Thread.sleep(10);
    }
  }

  // ---------------------------------------------------------------- identity

  @Test
  void helloOfAnotherApplicationIsRefusedWithNothingWritten() throws Exception {
    Transport server = tcp("1", APP, Map.of());
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    Socket s = rawClient(server);
    s.getOutputStream().write(concat(new Hello(new PeerIdentity(RAW, "app-other", "7")), intrusion(r.descriptor())));

    assertRefused(s, TransportError.WRONG_APPLICATION, "executor '7'", "belongs to application 'app-other', expected '"
        + APP + "'", "a port reused by another application");
    assertNothingHappened(server, r);
    assertEquals(1, server.metrics().rejected());

    Socket anonymous = rawClient(server); // a HELLO naming no application is not one of this application's
    anonymous.getOutputStream().write(concat(new Hello(RAW), intrusion(r.descriptor())));
    assertRefused(anonymous, TransportError.WRONG_APPLICATION, "belongs to application '', expected '" + APP + "'");
    assertNothingHappened(server, r);
  }

  @Test
  void transportsOfTwoApplicationsCannotWriteToEachOtherAndSameApplicationSeesTheExecutor() throws Exception {
    Transport server = tcp("1", APP, Map.of());
    Transport stranger = tcp("2", "app-other", Map.of());
    Transport colleague = tcp("3", APP, Map.of());
    RegisteredRegion r = TcpTestSupport.filled(server, 256);

    TransportException e = failure(stranger.connect(server.localEndpoint())
        .write(ByteBuffer.wrap(new byte[] {1, 2, 3, 4}), r.descriptor().at(0)));
    assertEquals(TransportError.WRONG_APPLICATION, e.error(), e.getMessage());
    assertTrue(e.getMessage().contains("expected '" + APP + "'"), e.getMessage());
    assertNothingHappened(server, r);

    colleague.connect(server.localEndpoint()).send(ByteBuffer.wrap(new byte[] {9})).get(30, SECONDS);
    assertEquals(List.of(new PeerIdentity(colleague.localEndpoint(), APP, "3")), List.copyOf(messagesFrom),
        "the handler sees who sent the message");
  }

  @Test
  void anotherApplicationIsRefusedOnlyOnceItHasProvedTheSecret() throws Exception {
    byte[] secret = "secret".getBytes(StandardCharsets.UTF_8);
    Transport server = new TcpTransportProvider().create(new TransportContext(ConfigSource.empty(), "127.0.0.1", "s",
        Optional.of(secret), APP, "1"));
    resources.add(server);
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    PeerIdentity other = new PeerIdentity(RAW, "app-other", "7");
    // Without the secret: refused as unauthenticated, told nothing about this application.
    ErrorReply e = handshakeAndIntrude(server, r, new TcpAuth("not-the-secret".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(10)), other, TransportError.AUTH_FAILED, "did not prove it holds the shared secret");
    assertFalse(e.message().contains(APP), e.message());
    // With it: refused as another application's.
    handshakeAndIntrude(server, r, new TcpAuth(secret, Duration.ofSeconds(10)), other,
        TransportError.WRONG_APPLICATION, "belongs to application 'app-other'", "expected '" + APP + "'");
    assertArrayEquals(filledBytes(256), bytes(r));
    assertEquals(0, server.metrics().writesReceived() + server.metrics().messagesReceived()
        + server.metrics().authenticated());
  }

  /** A raw client's handshake as {@code who} with {@code auth}'s secret, then writes: refused with {@code code}. */
  private ErrorReply handshakeAndIntrude(Transport server, RegisteredRegion r, TcpAuth auth, PeerIdentity who,
                                         TransportError code, String... inMessage) throws Exception {
    Socket s = rawClient(server);
    byte[] nonce = auth.newNonce();
    s.getOutputStream().write(concat(new AuthHello(nonce, who)));
    AuthChallenge c = assertInstanceOf(AuthChallenge.class, readFrame(s));
    s.getOutputStream().write(concat(new AuthProof(auth.clientProof(nonce, c.serverNonce(), who)),
        intrusion(r.descriptor())));
    return assertRefused(s, code, inMessage);
  }

  @Test
  void helloMustNameATcpEndpointWithoutExtraBytes() throws Exception {
    Transport server = tcp("1", "", Map.of());
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    Socket s = rawClient(server);
    s.getOutputStream().write(concat(new Hello(new EndpointDescriptor("tcp", "x:1", new byte[] {1, 2})),
        intrusion(r.descriptor())));

    assertRefused(s, TransportError.MALFORMED, "names endpoint tcp://x:1 with 2 extra bytes",
        "expected a tcp endpoint without extra bytes");
    assertNothingHappened(server, r);
  }

  @Test
  void helloWithTheEndpointAloneIsRefusedAsTruncated() throws Exception {
    Transport server = tcp("1", "", Map.of());
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    dev.slipstream.core.wire.WireWriter w = new dev.slipstream.core.wire.WireWriter(64);
    RAW.encode(w);
    byte[] endpoint = w.toByteArray();
    ByteBuffer oldHello = ByteBuffer.allocate(8 + endpoint.length).putInt(8 + endpoint.length)
        .put((byte) 'S').put((byte) 'L').put((byte) 1).put((byte) 0x10).put(endpoint);
    Socket s = rawClient(server);
    s.getOutputStream().write(concat(oldHello.array(), intrusion(r.descriptor())));

    assertRefused(s, TransportError.MALFORMED, "truncated application id length: need 4 bytes, have 0");
    assertNothingHappened(server, r);
  }

  @Test
  void peerSuppliedStringsAreEscapedInRefusalsAndInErrorsFromPeers() throws Exception {
    Transport server = tcp("1", APP, Map.of());
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    Socket s = rawClient(server);
    EndpointDescriptor forged = new EndpointDescriptor("tcp", "x\nWARN forged line:1", null);
    s.getOutputStream().write(concat(new Hello(new PeerIdentity(forged, "app\u001b[31m", "7\r")),
        intrusion(r.descriptor())));

    ErrorReply e = assertRefused(s, TransportError.WRONG_APPLICATION,
        "client tcp://x\\x0aWARN forged line:1 (executor '7\\x0d') belongs to application 'app\\x1b[31m'");
    assertTrue(e.message().chars().noneMatch(Character::isISOControl), e.message());
    assertNothingHappened(server, r);

    // A peer's error message becomes an exception message only escaped.
    TransportException fromPeer = new ErrorReply(9, TransportError.BAD_KEY.code(), "bad\nkey").toException();
    assertEquals("BAD_KEY: bad\\x0akey", fromPeer.getMessage());
  }

  // ---------------------------------------------------------------- before HELLO

  @Test
  void frameLargerThanTheLargestHelloIsRefusedBeforeHelloWithoutBufferingIt() throws Exception {
    Transport server = tcp("1", "", Map.of());
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    Socket s = rawClient(server);
    s.setSoTimeout(10_000);
    ByteBuffer header = ByteBuffer.allocate(8).putInt(1 << 20).put((byte) 'S').put((byte) 'L').put((byte) 1)
        .put((byte) 0x11);
    s.getOutputStream().write(header.array()); // a 1 MiB WRITE (under maxFrameBytes), body never sent

    assertRefused(s, TransportError.MALFORMED, "frame length 1048576 outside [8, "
        + TcpHandshake.MAX_FRAME_BEFORE_HELLO + "]", "the limit before HELLO");
    assertNothingHappened(server, r);
  }

  @Test
  void theLargestValidHelloFitsTheLimitBeforeHello() throws Exception {
    String longest = "é".repeat(PeerIdentity.MAX_ID_BYTES / 2); // 256 UTF-8 bytes
    Transport server = tcp("1", longest, Map.of());
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    RegionDescriptor d = r.descriptor();
    Hello largest = new Hello(new PeerIdentity(new EndpointDescriptor("tcp",
        "h".repeat(EndpointDescriptor.MAX_ADDRESS - 6) + ":65535", null), longest, longest));
    byte[] hello = ReceiverHarness.encode(largest);
    // The name "tcp" is 61 bytes under its bound; everything else is at its bound.
    assertEquals(TcpHandshake.MAX_FRAME_BEFORE_HELLO - (EndpointDescriptor.MAX_NAME - 3), hello.length);
    Socket s = rawClient(server);
    s.getOutputStream().write(concat(hello, new Write(5, new Target(d.id(), d.key(), 0), 4, 0,
        Unpooled.wrappedBuffer(new byte[] {1, 2, 3, 4}))));
    s.shutdownOutput();

    assertEquals(List.of(new Ack(5, 0)), frames(s.getInputStream().readAllBytes()));
    assertArrayEquals(new byte[] {1, 2, 3, 4}, Arrays.copyOf(bytes(r), 4));
  }

  @Test
  void connectionWithoutHelloIsClosedAfterTheConnectTimeout() throws Exception {
    Transport server = tcp("1", "", Map.of("spark.slipstream.tcp.connectTimeout", "300ms"));
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    Socket s = rawClient(server);
    byte[] hello = ReceiverHarness.encode(new Hello(RAW));
    s.getOutputStream().write(hello, 0, hello.length - 1); // all but its last byte

    assertRefused(s, TransportError.TIMEOUT, "no HELLO within 300 ms (spark.slipstream.tcp.connectTimeout)");
    assertNothingHappened(server, r);
    assertEquals(1, server.metrics().connectionsTimedOut());
  }

  // ---------------------------------------------------------------- idle, cap, unread replies

  @Test
  void idleConnectionIsClosedAndTheNextConnectOpensANewOne() throws Exception {
    Transport server = tcp("1", "", Map.of("spark.slipstream.tcp.idleTimeout", "300ms"));
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    RegionDescriptor d = r.descriptor();
    Socket s = rawClient(server);
    s.getOutputStream().write(concat(new Hello(RAW), new Write(5, new Target(d.id(), d.key(), 0), 4, 0,
        Unpooled.wrappedBuffer(new byte[] {1, 2, 3, 4}))));

    List<TcpFrame> got = frames(s.getInputStream().readAllBytes()); // the ACK, then the idle connection's end
    assertEquals(2, got.size(), "replies: " + got);
    assertEquals(new Ack(5, 0), got.get(0));
    ErrorReply e = assertInstanceOf(ErrorReply.class, got.get(1));
    assertEquals(TransportError.TIMEOUT.code(), e.code());
    assertTrue(e.message().contains("no frame for 300 ms (spark.slipstream.tcp.idleTimeout)"), e.message());
    assertEquals(1, server.metrics().connectionsTimedOut());

    Transport client = tcp("2", "", Map.of());
    var q = client.connect(server.localEndpoint());
    q.write(ByteBuffer.wrap(new byte[] {7}), d.at(4)).get(30, SECONDS);
    awaitCount(() -> q.isOpen() ? 0 : 1, 1, "the idle queue closed by the receiver");
    client.connect(server.localEndpoint()).write(ByteBuffer.wrap(new byte[] {8}), d.at(5)).get(30, SECONDS);
    assertArrayEquals(new byte[] {1, 2, 3, 4, 7, 8}, Arrays.copyOf(bytes(r), 6));
  }

  @Test
  void connectionOverTheCapIsRefusedAtOnceAndCounted() throws Exception {
    Transport server = tcp("1", "", Map.of("spark.slipstream.tcp.maxInboundConnections", "2"));
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    RegionDescriptor d = r.descriptor();
    Socket first = rawClient(server);
    Socket second = rawClient(server);
    for (Socket admitted : List.of(first, second)) { // each answered, so both count before the next connects
      admitted.getOutputStream().write(concat(new Hello(RAW), new FetchAdd(1, new Target(d.id(), d.key() + 1, 8), 1)));
      assertInstanceOf(ErrorReply.class, readFrame(admitted));
    }

    for (int i = 0; i < 3; i++) {
      Socket over = rawClient(server);
      over.getOutputStream().write(concat(new Hello(RAW), intrusion(d)));
      assertRefused(over, TransportError.TOO_MANY_CONNECTIONS, "has 2 inbound connections open",
          "spark.slipstream.tcp.maxInboundConnections");
    }
    assertNothingHappened(server, r);
    assertEquals(3, server.metrics().connectionsRefused());

    first.close();
    // Once the receiver has seen it go, a connection fits again.
    long deadline = System.nanoTime() + SECONDS.toNanos(30);
    for (;;) {
      Socket again = rawClient(server);
      again.getOutputStream().write(concat(new Hello(RAW), new Write(5, new Target(d.id(), d.key(), 0), 4, 0,
          Unpooled.wrappedBuffer(new byte[] {1, 2, 3, 4}))));
      again.shutdownOutput();
      List<TcpFrame> got = frames(again.getInputStream().readAllBytes());
      if (got.equals(List.of(new Ack(5, 0)))) {
        break;
      }
      assertTrue(System.nanoTime() < deadline, "no connection admitted after one closed: " + got);
      Thread.sleep(20);
    }
  }

  @Test
  void clientThatNeverReadsItsRepliesIsClosedWhileTheReceiversPendingRepliesStayBounded() throws Exception {
    Transport server = tcp("1", "", Map.of("spark.slipstream.tcp.idleTimeout", "1s"));
    RegisteredRegion r = TcpTestSupport.filled(server, 256);
    RegionDescriptor d = r.descriptor();
    Socket s = new Socket();
    resources.add(s);
    s.setReceiveBufferSize(16 * 1024);
    TcpAddress a = TcpAddress.parse(server.localEndpoint().address());
    s.connect(new java.net.InetSocketAddress(a.host(), a.port()), 10_000);
    OutputStream out = s.getOutputStream();
    out.write(concat(new Hello(RAW)));
    // Fetch-adds with a wrong key: each one is rejected and answered with an ERROR that is never read.
    ByteArrayOutputStream batch = new ByteArrayOutputStream();
    for (int i = 1; i <= 1000; i++) {
      batch.write(ReceiverHarness.encode(new FetchAdd(i, new Target(d.id(), d.key() + 1, 8), 1)));
    }
    byte[] ops = batch.toByteArray();
    long budget = 256L << 20;

    long sent = assertTimeoutPreemptively(Duration.ofSeconds(120), () -> {
      long n = 0;
      try {
        while (n < budget) {
          out.write(ops);
          n += ops.length;
        }
      } catch (IOException closed) {
        return n; // the receiver closed the connection
      }
      return fail("sent " + n + " bytes of operations without reading a reply, and the receiver still reads them");
    });

    assertTrue(sent > 0);
    awaitCount(() -> server.metrics().connectionsUnread(), 1, "connections closed for unread replies");
    long peak = server.metrics().peakPendingReplyBytes();
    assertTrue(peak > 0 && peak <= TcpInboundGuard.Policy.MAX_PENDING_REPLY_BYTES,
        "pending reply bytes peaked at " + peak + ", expected at most "
        + TcpInboundGuard.Policy.MAX_PENDING_REPLY_BYTES);
    assertTrue(server.metrics().rejected() > 0);
    assertNothingHappened(server, r);
  }
}
