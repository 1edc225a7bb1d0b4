package dev.slipstream.core.transport.tcp;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.bytes;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.failure;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.concat;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.frames;
import static dev.slipstream.core.transport.tcp.TcpTestSupport.intrusion;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.tcp.TcpFrame.Ack;
import dev.slipstream.core.transport.tcp.TcpHandshake.AuthChallenge;
import dev.slipstream.core.transport.tcp.TcpHandshake.AuthHello;
import dev.slipstream.core.transport.tcp.TcpHandshake.AuthProof;
import dev.slipstream.core.transport.tcp.TcpFrame.ErrorReply;
import dev.slipstream.core.transport.tcp.TcpHandshake.Hello;
import io.netty.buffer.ByteBuf;
import io.netty.util.ReferenceCountUtil;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Authentication of tcp connections with a shared secret ({@link TcpAuth}): transports with the
 * same secret work; a wrong secret or none fails on both sides with AUTH_FAILED; a raw socket
 * client that skips, short-cuts or forges the handshake gets ERROR(0, AUTH_FAILED), the
 * connection closes, and no region byte, message or fetch-add word changes.
 */
class TcpAuthenticationTest {
  private static final String SECRET = "s3cret-of-the-application";
  private static final String OTHER_SECRET = "another-applications-secret";
  private static final EndpointDescriptor RAW = new EndpointDescriptor("tcp", "raw-client:1", null);
  private static final PeerIdentity RAW_ID = PeerIdentity.of(RAW);

  private final List<AutoCloseable> resources = new ArrayList<>();
  private final ConcurrentLinkedQueue<EndpointDescriptor> messagesFrom = new ConcurrentLinkedQueue<>();

  @AfterEach
  void closeAll() throws Exception {
    for (int i = resources.size() - 1; i >= 0; i--) {
      resources.get(i).close();
    }
  }

  private Transport tcp(String name, String secret, Map<String, String> config) throws Exception {
    Optional<byte[]> s = Optional.ofNullable(secret).map(x -> x.getBytes(StandardCharsets.UTF_8));
    Transport t = new TcpTransportProvider().create(
        new TransportContext(ConfigSource.of(config), "127.0.0.1", name, s));
    t.setMessageHandler((from, msg) -> messagesFrom.add(from));
    resources.add(t);
    return t;
  }

  private Transport tcp(String name, String secret) throws Exception {
    return tcp(name, secret, Map.of());
  }

  private static byte[] filledBytes() {
    byte[] b = new byte[256];
    Arrays.fill(b, (byte) 0x5a);
    return b;
  }

  private static RegisteredRegion filled(Transport t) throws TransportException {
    return TcpTestSupport.filled(t, 256);
  }

  private Socket rawClient(Transport t) throws IOException {
    Socket s = TcpTestSupport.rawClient(t);
    resources.add(s);
    return s;
  }

  private static void assertAuthFailed(TransportException e, String... inMessage) {
    assertEquals(TransportError.AUTH_FAILED, e.error(), e.getMessage());
    for (String part : inMessage) {
      assertTrue(e.getMessage().contains(part), "message '" + e.getMessage() + "' should say " + part);
    }
    assertNoSecretIn(e.getMessage());
  }

  private static void assertNoSecretIn(String message) {
    assertFalse(message.contains(SECRET) || message.contains(OTHER_SECRET), "message leaks a secret: " + message);
  }

  /** Waits (bounded) until {@code counter} reaches {@code atLeast}; the receiving side counts asynchronously. */
  private static void awaitCount(LongSupplier counter, long atLeast, String what) throws InterruptedException {
    long deadline = System.nanoTime() + SECONDS.toNanos(30);
    while (counter.getAsLong() < atLeast) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError(what + ": got " + counter.getAsLong() + ", expected at least " + atLeast);
      }
      Thread.sleep(10);
    }
  }

  // ---------------------------------------------------------------- transports with and without the secret

  @Test
  void sameSecretWritesSignalsSendsAndFetchAdds() throws Exception {
    Transport server = tcp("server", SECRET);
    Transport client = tcp("client", SECRET);
    RegisteredRegion r = server.register(ByteBuffer.allocateDirect(4096));
    PeerQueue q = client.connect(server.localEndpoint());

    q.writeAndSignal(ByteBuffer.wrap(new byte[] {1, 2, 3, 4}), r.descriptor().at(64), r.descriptor().at(8), 3)
        .get(30, SECONDS);
    q.send(ByteBuffer.wrap(new byte[] {9})).get(30, SECONDS);
    assertEquals(3L, q.fetchAdd(r.descriptor().at(8), 4).get(30, SECONDS));

    assertArrayEquals(new byte[] {1, 2, 3, 4}, Arrays.copyOfRange(bytes(r), 64, 68));
    assertEquals(7, r.readSignal(8));
    assertEquals(List.of(client.localEndpoint()), List.copyOf(messagesFrom), "the authenticated sender's endpoint");
    assertEquals(1, client.metrics().authenticated());
    assertEquals(1, server.metrics().authenticated());
    assertEquals(0, client.metrics().authFailures() + server.metrics().authFailures());
  }

  /**
   * A server with {@code serverSecret} and a client with {@code clientSecret} (null: none): every
   * operation fails with AUTH_FAILED whose message says {@code inMessage}, both sides count the
   * failure, and nothing reaches the server.
   */
  private void assertRefusedBetween(String serverSecret, String clientSecret, String... inMessage) throws Exception {
    Transport server = tcp("server", serverSecret);
    Transport client = tcp("client", clientSecret);
    RegisteredRegion r = filled(server);
    PeerQueue q = client.connect(server.localEndpoint());

    CompletableFuture<Void> w = q.write(ByteBuffer.wrap(new byte[] {1, 2, 3, 4}), r.descriptor().at(0));
    CompletableFuture<Void> m = q.send(ByteBuffer.wrap(new byte[] {9}));
    CompletableFuture<Long> f = q.fetchAdd(r.descriptor().at(8), 1);
    assertAuthFailed(failure(w), inMessage);
    assertEquals(TransportError.AUTH_FAILED, failure(m).error());
    assertEquals(TransportError.AUTH_FAILED, failure(f).error());
    assertEquals(1, client.metrics().authFailures());
    awaitCount(() -> server.metrics().authFailures(), 1, "authentication failures counted by the server");
    assertEquals(0, server.metrics().authenticated() + client.metrics().authenticated());
    assertArrayEquals(filledBytes(), bytes(r));
    assertTrue(messagesFrom.isEmpty(), "messages delivered: " + messagesFrom);
  }

  @Test
  void wrongSecretFailsOnBothSides() throws Exception {
    // The client checks the server's proof first, so it is the client that finds the mismatch; the
    // server sees the client leave after its challenge.
    assertRefusedBetween(SECRET, OTHER_SECRET, "did not prove it holds the shared secret",
        "AUTH_CHALLENGE proof does not match", "different spark.authenticate secrets");
  }

  @Test
  void clientWithoutSecretIsRefusedByAServerWithOne() throws Exception {
    assertRefusedBetween(SECRET, null, "sent HELLO without authenticating", "expected AUTH_HELLO",
        "spark.authenticate is on here");
  }

  @Test
  void clientWithSecretRefusesAServerWithoutOne() throws Exception {
    assertRefusedBetween(null, SECRET, "asks to authenticate, but this transport has no shared secret",
        "spark.authenticate is off");
  }

  @Test
  void clientRefusesAServerThatDoesNotAnswerTheHandshakeInTime() throws Exception {
    // A listener that accepts and never answers: the queue must not wait for it forever, nor send it anything.
    try (java.net.ServerSocket silent = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      Transport client = tcp("client", SECRET, Map.of("spark.slipstream.tcp.connectTimeout", "300ms"));
      PeerQueue q = client.connect(new EndpointDescriptor("tcp", "127.0.0.1:" + silent.getLocalPort(), null));
      CompletableFuture<Void> w = q.write(ByteBuffer.wrap(new byte[] {1}), new RegionDescriptor(1, 0, 64, 1,
          dev.slipstream.core.transport.MemoryKind.HOST, -1).at(0));
      try (Socket accepted = silent.accept()) {
        assertAuthFailed(failure(w), "did not answer authentication within 300 ms", "expected AUTH_CHALLENGE");
        accepted.setSoTimeout(30_000);
        List<TcpFrame> got = frames(accepted.getInputStream().readAllBytes());
        assertEquals(1, got.size(), "the peer got only the AUTH_HELLO: " + got);
        assertInstanceOf(AuthHello.class, got.get(0));
      }
    }
  }

  @Test
  void clientSendsNothingToAServerWhoseProofIsForged() throws Exception {
    try (java.net.ServerSocket fake = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      Transport client = tcp("client", SECRET);
      EndpointDescriptor fakeEndpoint = new EndpointDescriptor("tcp", "127.0.0.1:" + fake.getLocalPort(), null);
      PeerQueue q = client.connect(fakeEndpoint);
      CompletableFuture<Void> w = q.write(ByteBuffer.wrap(new byte[] {1}), new RegionDescriptor(1, 0, 64, 1,
          dev.slipstream.core.transport.MemoryKind.HOST, -1).at(0));
      try (Socket accepted = fake.accept()) {
        accepted.setSoTimeout(30_000);
        AuthHello hello = assertInstanceOf(AuthHello.class, readFrame(accepted.getInputStream()));
        TcpAuth forger = new TcpAuth(OTHER_SECRET.getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10));
        byte[] ns = forger.newNonce();
        accepted.getOutputStream().write(concat(new AuthChallenge(ns, forger.serverProof(hello.clientNonce(), ns,
            hello.identity()))));

        assertAuthFailed(failure(w), "peer " + fakeEndpoint + " did not prove it holds the shared secret",
            "AUTH_CHALLENGE proof does not match");
        assertEquals(0, accepted.getInputStream().readAllBytes().length, "the client sent a proof or an operation");
      }
    }
  }

  @Test
  void emptySecretIsRefusedAtCreation() {
    TransportContext ctx = new TransportContext(ConfigSource.empty(), "127.0.0.1", "e", Optional.of(new byte[0]));
    TransportException e = assertThrows(TransportException.class, () -> new TcpTransportProvider().create(ctx));
    assertEquals(TransportError.UNAVAILABLE, e.error());
    assertTrue(e.getMessage().contains("shared secret (spark.authenticate) is empty"), e.getMessage());
  }

  // ---------------------------------------------------------------- raw socket clients


  private static TcpFrame readFrame(InputStream in) throws IOException, TransportException {
    DataInputStream d = new DataInputStream(in);
    int length = d.readInt();
    byte[] b = new byte[length];
    ByteBuffer.wrap(b).putInt(length);
    d.readFully(b, 4, length - 4);
    return frames(b).get(0);
  }

  /** The whole rest of the server's answer is one ERROR(0, AUTH_FAILED) naming {@code inMessage}; then it closes. */
  private static void assertRefused(Socket s, String... inMessage) throws Exception {
    List<TcpFrame> got = frames(s.getInputStream().readAllBytes()); // returns at the server's close
    assertEquals(1, got.size(), "replies: " + got);
    ErrorReply e = assertInstanceOf(ErrorReply.class, got.get(0));
    assertEquals(0, e.seq());
    assertAuthFailed(e.toException(), inMessage);
  }

  private void assertNothingHappened(Transport server, RegisteredRegion r) {
    assertArrayEquals(filledBytes(), bytes(r), "region bytes changed");
    assertTrue(messagesFrom.isEmpty(), "messages delivered: " + messagesFrom);
    assertEquals(0, server.metrics().writesReceived() + server.metrics().messagesReceived());
    assertEquals(0, server.metrics().authenticated());
  }

  /** A raw client sends {@code opening} and then the intrusion in one write; it is refused with {@code inMessage}. */
  private void assertIntrusionRefused(byte[] opening, String... inMessage) throws Exception {
    Transport server = tcp("server", SECRET);
    RegisteredRegion r = filled(server);
    Socket s = rawClient(server);
    s.getOutputStream().write(concat(opening, intrusion(r.descriptor())));

    assertRefused(s, inMessage);
    assertNothingHappened(server, r);
    assertEquals(1, server.metrics().authFailures());
  }

  @Test
  void rawClientThatSkipsTheHandshakeCannotWriteSendOrFetchAdd() throws Exception {
    assertIntrusionRefused(new byte[0], "got a WRITE frame before authentication, expected AUTH_HELLO");
  }

  @Test
  void rawClientWithAPlainHelloCannotWriteSendOrFetchAdd() throws Exception {
    assertIntrusionRefused(concat(new Hello(RAW)), "client " + RAW + " sent HELLO without authenticating");
  }

  @Test
  void rawClientWithAForgedProofCannotWriteSendOrFetchAdd() throws Exception {
    Transport server = tcp("server", SECRET);
    RegisteredRegion r = filled(server);
    Socket s = rawClient(server);
    TcpAuth forger = new TcpAuth(OTHER_SECRET.getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10));
    byte[] nonce = forger.newNonce();
    s.getOutputStream().write(concat(new AuthHello(nonce, RAW)));
    AuthChallenge c = assertInstanceOf(AuthChallenge.class, readFrame(s.getInputStream()));
    s.getOutputStream().write(concat(new AuthProof(forger.clientProof(nonce, c.serverNonce(), RAW_ID)),
        intrusion(r.descriptor())));

    assertRefused(s, "client " + RAW + " did not prove it holds the shared secret", "AUTH_PROOF does not match");
    assertNothingHappened(server, r);
  }

  @Test
  void rawClientThatSendsOperationsBeforeItsProofIsRefused() throws Exception {
    Transport server = tcp("server", SECRET);
    RegisteredRegion r = filled(server);
    Socket s = rawClient(server);
    s.getOutputStream().write(concat(new AuthHello(new byte[TcpAuth.NONCE_LENGTH], RAW), intrusion(r.descriptor())));

    List<TcpFrame> got = frames(s.getInputStream().readAllBytes());
    assertEquals(2, got.size(), "replies: " + got);
    assertInstanceOf(AuthChallenge.class, got.get(0));
    ErrorReply e = assertInstanceOf(ErrorReply.class, got.get(1));
    assertAuthFailed(e.toException(), "got a WRITE frame from " + RAW + " before its AUTH_PROOF");
    assertNothingHappened(server, r);
  }

  @Test
  void proofOfOneConnectionDoesNotOpenAnother() throws Exception {
    Transport server = tcp("server", SECRET);
    RegisteredRegion r = filled(server);
    TcpAuth holder = new TcpAuth(SECRET.getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10));
    byte[] nonce = holder.newNonce();
    Socket first = rawClient(server);
    first.getOutputStream().write(concat(new AuthHello(nonce, RAW)));
    AuthChallenge c = assertInstanceOf(AuthChallenge.class, readFrame(first.getInputStream()));
    byte[] proof = holder.clientProof(nonce, c.serverNonce(), RAW_ID);

    // Replayed on a second connection with the same client nonce: the server's nonce is fresh.
    Socket second = rawClient(server);
    second.getOutputStream().write(concat(new AuthHello(nonce, RAW)));
    AuthChallenge c2 = assertInstanceOf(AuthChallenge.class, readFrame(second.getInputStream()));
    assertFalse(Arrays.equals(c.serverNonce(), c2.serverNonce()), "server nonces repeat");
    second.getOutputStream().write(concat(new AuthProof(proof), intrusion(r.descriptor())));
    assertRefused(second, "AUTH_PROOF does not match");
    assertNothingHappened(server, r);

    // The same proof on its own connection is good: the raw client above is a working client.
    first.getOutputStream().write(concat(new AuthProof(proof), intrusion(r.descriptor())));
    first.shutdownOutput();
    List<TcpFrame> got = frames(first.getInputStream().readAllBytes());
    assertEquals(3, got.size(), "replies: " + got);
    assertEquals(new Ack(1, 0), got.get(0));
    assertEquals(new Ack(2, 0), got.get(1));
    assertEquals(new Ack(3, 0x5a5a5a5a5a5a5a5aL), got.get(2));
    assertArrayEquals(new byte[] {1, 2, 3, 4}, Arrays.copyOfRange(bytes(r), 0, 4));
    assertEquals(List.of(RAW), List.copyOf(messagesFrom));
  }

  @Test
  void serverClosesAConnectionThatDoesNotAuthenticateInTime() throws Exception {
    Transport server = tcp("server", SECRET, Map.of("spark.slipstream.tcp.connectTimeout", "300ms"));
    RegisteredRegion r = filled(server);
    Socket s = rawClient(server);

    assertRefused(s, "no authentication within 300 ms", "spark.slipstream.tcp.connectTimeout");
    assertNothingHappened(server, r);
  }

  @Test
  void frameLargerThanAnyHandshakeFrameIsRefusedBeforeAuthentication() throws Exception {
    Transport server = tcp("server", SECRET);
    RegisteredRegion r = filled(server);
    Socket s = rawClient(server);
    ByteBuffer header = ByteBuffer.allocate(8).putInt(1 << 20).put((byte) 'S').put((byte) 'L').put((byte) 1)
        .put((byte) 0x11);
    s.getOutputStream().write(header.array()); // a 1 MiB WRITE (under maxFrameBytes): not buffered

    assertRefused(s, "frame length 1048576 outside [8, " + TcpAuth.MAX_FRAME_BEFORE_AUTH + "]",
        "the limit before authentication completes");
    assertNothingHappened(server, r);
  }

  // ---------------------------------------------------------------- frames

  @Test
  void handshakeFramesRoundTripAndRejectTruncation() throws Exception {
    byte[] nonce = new byte[TcpAuth.NONCE_LENGTH];
    nonce[0] = 7;
    byte[] proof = new byte[TcpAuth.PROOF_LENGTH];
    proof[31] = 9;
    for (TcpFrame f : List.of(new AuthHello(nonce, RAW), new AuthChallenge(nonce, proof), new AuthProof(proof))) {
      assertEquals(List.of(f), frames(ReceiverHarness.encode(f)));
    }
    byte[] cut = ReceiverHarness.encode(new AuthProof(proof));
    ByteBuffer.wrap(cut).putInt(cut.length - 1);
    TransportException e = assertThrows(TransportException.class,
        () -> frames(Arrays.copyOf(cut, cut.length - 1)));
    assertEquals(TransportError.MALFORMED, e.error());
    assertEquals("MALFORMED: truncated AUTH_PROOF frame: need 32 bytes for client proof, have 31", e.getMessage());
  }

  @Test
  void proofsDependOnSecretDirectionNoncesAndEndpoint() {
    TcpAuth a = new TcpAuth(SECRET.getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(1));
    TcpAuth b = new TcpAuth(OTHER_SECRET.getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(1));
    byte[] nc = a.newNonce();
    byte[] ns = a.newNonce();
    byte[] p = a.clientProof(nc, ns, RAW_ID);
    assertEquals(TcpAuth.PROOF_LENGTH, p.length);
    assertTrue(TcpAuth.matches(p, a.clientProof(nc, ns, RAW_ID)));
    assertFalse(TcpAuth.matches(p, b.clientProof(nc, ns, RAW_ID)), "secret");
    assertFalse(TcpAuth.matches(p, a.serverProof(nc, ns, RAW_ID)), "direction");
    assertFalse(TcpAuth.matches(p, a.clientProof(ns, nc, RAW_ID)), "nonces");
    assertFalse(TcpAuth.matches(p, a.clientProof(nc, ns, PeerIdentity.of(new EndpointDescriptor("tcp", "raw-client:2",
        null)))), "endpoint");
    assertFalse(TcpAuth.matches(p, a.clientProof(nc, ns, new PeerIdentity(RAW, "app-2", ""))), "application id");
    assertFalse(TcpAuth.matches(p, a.clientProof(nc, ns, new PeerIdentity(RAW, "", "7"))), "executor id");
    assertNoSecretIn(a.toString());
  }
}
