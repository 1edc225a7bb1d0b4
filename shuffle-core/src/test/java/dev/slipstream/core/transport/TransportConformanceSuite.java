package dev.slipstream.core.transport;

import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The behaviour every transport provider must have, written once and run against each provider
 * by a subclass that says how to create a transport (as Netty's testsuite does per transport).
 *
 * <p>What a provider must do to pass, beyond the SPI Javadoc: rejected operations fail their
 * future with a {@link TransportException} whose {@link TransportError} is the one named below
 * and whose message names the offending values (the offset, length, region id and region length
 * for OUT_OF_RANGE; the region id for UNKNOWN_REGION and BAD_KEY; the offset for MISALIGNED), and
 * they change no byte of any region; the queue stays usable after a rejection. Queues returned by
 * {@link Transport#connect} are cached per peer, so tests that need independent queues use
 * separate sending transports.
 */
public abstract class TransportConformanceSuite {
  /** Longest any single operation may take before the test calls it hung. */
  protected static final long TIMEOUT_SECONDS = 30;
  /** The application id subclasses give their transports; each one's executor id is its name. */
  protected static final String APPLICATION = "app-conformance";

  private final List<Transport> transports = new ArrayList<>();

  /** A new, open transport of the provider under test; the suite closes it. */
  protected abstract Transport newTransport(String name) throws Exception;

  private Transport transport(String name) throws Exception {
    Transport t = newTransport(name);
    transports.add(t);
    return t;
  }

  @AfterEach
  void closeTransports() {
    for (Transport t : transports) {
      t.close();
      assertEquals(0, t.registeredRegionCount(), t + " still has regions after close()");
    }
  }

  // ---------------------------------------------------------------- helpers

  protected static <T> T await(CompletableFuture<T> f) throws Exception {
    try {
      return f.get(TIMEOUT_SECONDS, SECONDS);
    } catch (TimeoutException e) {
      throw new AssertionError("operation did not complete within " + TIMEOUT_SECONDS + " s");
    } catch (ExecutionException e) {
      throw new AssertionError("operation failed: " + e.getCause(), e.getCause());
    }
  }

  /** The TransportException {@code f} fails with; fails the test if it succeeds, hangs or fails otherwise. */
  protected static TransportException awaitFailure(CompletableFuture<?> f) throws InterruptedException {
    try {
      f.get(TIMEOUT_SECONDS, SECONDS);
    } catch (TimeoutException e) {
      throw new AssertionError("operation did not complete within " + TIMEOUT_SECONDS + " s");
    } catch (ExecutionException e) {
      return assertInstanceOf(TransportException.class, e.getCause(), "failure cause");
    }
    throw new AssertionError("operation completed normally, expected a TransportException");
  }

  /** Null when {@code f} succeeded, else its TransportException; fails the test if it hangs. */
  private static TransportException outcome(CompletableFuture<?> f) throws InterruptedException {
    try {
      f.get(TIMEOUT_SECONDS, SECONDS);
      return null;
    } catch (TimeoutException e) {
      throw new AssertionError("operation did not complete within " + TIMEOUT_SECONDS + " s");
    } catch (ExecutionException e) {
      return assertInstanceOf(TransportException.class, e.getCause(), "failure cause");
    }
  }

  private static void assertError(TransportException e, TransportError expected, Object... inMessage) {
    assertEquals(expected, e.error(), "error of " + e.getMessage());
    for (Object part : inMessage) {
      assertTrue(e.getMessage().contains(String.valueOf(part)),
          "message '" + e.getMessage() + "' should name " + part);
    }
  }

  private static ByteBuffer pattern(int length, int seed) {
    ByteBuffer b = ByteBuffer.allocateDirect(length);
    for (int i = 0; i < length; i++) {
      b.put(i, patternByte(seed, i));
    }
    return b;
  }

  private static byte patternByte(int seed, int i) {
    return (byte) ((seed * 131 + i * 7 + (i >>> 8)) % 255 + 1); // never 0
  }

  private static byte[] bytes(RegisteredRegion r) {
    ByteBuffer b = r.buffer();
    byte[] out = new byte[b.remaining()];
    b.get(out);
    return out;
  }

  private static byte[] bytes(ByteBuffer b) {
    byte[] out = new byte[b.remaining()];
    b.duplicate().get(out);
    return out;
  }

  /** A region whose bytes are all 0x5a, so a write of zeros would show. */
  private static RegisteredRegion filledRegion(Transport t, int length) throws TransportException {
    ByteBuffer m = ByteBuffer.allocateDirect(length);
    for (int i = 0; i < length; i++) {
      m.put(i, (byte) 0x5a);
    }
    return t.register(m);
  }

  // ---------------------------------------------------------------- round trips

  @Test
  void messageHandlerSeesTheSendersEndpointApplicationAndExecutor() throws Exception {
    Transport a = transport("exec-a");
    Transport b = transport("exec-b");
    CompletableFuture<PeerIdentity> from = new CompletableFuture<>();
    b.setMessageHandler(MessageHandler.identified((id, message) -> from.complete(id)));
    await(a.connect(b.localEndpoint()).send(ByteBuffer.wrap(new byte[] {1})));
    assertEquals(new PeerIdentity(a.localEndpoint(), APPLICATION, "exec-a"), await(from));

    CompletableFuture<EndpointDescriptor> plain = new CompletableFuture<>();
    a.setMessageHandler((endpoint, message) -> plain.complete(endpoint));
    await(b.connect(a.localEndpoint()).send(ByteBuffer.wrap(new byte[] {2})));
    assertEquals(b.localEndpoint(), await(plain), "a handler of endpoints alone still gets the endpoint");
  }

  @Test
  void writeArrivesByteExact() throws Exception {
    Transport a = transport("a");
    Transport b = transport("b");
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(64 * 1024));
    PeerQueue q = a.connect(b.localEndpoint());
    ByteBuffer direct = pattern(10_000, 1);
    ByteBuffer heap = ByteBuffer.wrap(bytes(pattern(777, 2)));
    heap.position(7); // only [position, limit) is written
    await(q.write(direct, r.descriptor().at(100)));
    await(q.write(heap, r.descriptor().at(20_000)));
    q.commit();

    ByteBuffer got = r.buffer();
    assertArrayEquals(bytes(direct), bytes(got.slice(100, 10_000)));
    assertArrayEquals(bytes(heap), bytes(got.slice(20_000, 770)));
    assertEquals(0, got.get(99));
    assertEquals(0, got.get(20_770));
    assertEquals(7, heap.position(), "source position must not change");
    assertEquals(10_770, b.metrics().bytesReceived());
    assertEquals(10_770, a.metrics().bytesWritten());
  }

  @Test
  void writeAndSignalDeliversDataThenSignal() throws Exception {
    Transport a = transport("a");
    Transport b = transport("b");
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(8192));
    CompletableFuture<long[]> seen = new CompletableFuture<>();
    r.setSignalListener((region, offset, value) -> seen.complete(new long[] {offset, value}));
    PeerQueue q = a.connect(b.localEndpoint());
    ByteBuffer src = pattern(4000, 3);

    await(q.writeAndSignal(src, r.descriptor().at(64), r.descriptor().at(8), 5));

    assertArrayEquals(new long[] {8, 5}, seen.get(TIMEOUT_SECONDS, SECONDS));
    assertEquals(5, r.readSignal(8));
    assertArrayEquals(bytes(src), bytes(r.buffer().slice(64, 4000)));
    assertEquals(1, a.metrics().signals());
  }

  @Test
  void signalAddsToTheCounterAndTellsTheListener() throws Exception {
    Transport a = transport("a");
    Transport b = transport("b");
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(4096));
    ConcurrentLinkedQueue<Long> values = new ConcurrentLinkedQueue<>();
    CompletableFuture<Void> two = new CompletableFuture<>();
    r.setSignalListener((region, offset, value) -> {
      values.add(value);
      if (values.size() == 2) {
        two.complete(null);
      }
    });
    PeerQueue q = a.connect(b.localEndpoint());

    await(q.signal(r.descriptor().at(4088), 5));
    await(q.signal(r.descriptor().at(4088), 7));

    two.get(TIMEOUT_SECONDS, SECONDS);
    assertEquals(List.of(5L, 12L), new ArrayList<>(values));
    assertEquals(12, r.readSignal(4088));
    r.resetSignal(4088, 0);
    await(q.signal(r.descriptor().at(4088), -3));
    assertEquals(-3, r.readSignal(4088));
  }

  @Test
  void fetchAddReturnsTheOldValue() throws Exception {
    Transport a = transport("a");
    Transport b = transport("b");
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(64));
    PeerQueue q = a.connect(b.localEndpoint());

    assertEquals(0L, await(q.fetchAdd(r.descriptor().at(16), 3)));
    assertEquals(3L, await(q.fetchAdd(r.descriptor().at(16), 4)));
    assertEquals(7L, await(q.fetchAdd(r.descriptor().at(16), Long.MAX_VALUE)));
    assertEquals(7 + Long.MAX_VALUE, r.readSignal(16)); // wraps like getAndAdd
    assertEquals(r.readSignal(16), r.buffer().order(ByteOrder.LITTLE_ENDIAN).getLong(16), "signals are little-endian");
  }

  @Test
  void sendDeliversTheMessageWithTheSendersEndpoint() throws Exception {
    Transport a = transport("a");
    Transport b = transport("b");
    CompletableFuture<Object[]> got = new CompletableFuture<>();
    b.setMessageHandler((from, message) -> {
      byte[] copy = new byte[message.remaining()];
      message.get(copy);
      got.complete(new Object[] {from, copy});
    });
    PeerQueue q = a.connect(b.localEndpoint());
    ByteBuffer message = pattern(300, 4);

    await(q.send(message));

    Object[] m = got.get(TIMEOUT_SECONDS, SECONDS);
    assertEquals(a.localEndpoint(), m[0]);
    assertArrayEquals(bytes(message), (byte[]) m[1]);
    assertEquals(1, b.metrics().messagesReceived());
  }

  @Test
  void zeroLengthWritesCompleteAndChangeNothing() throws Exception {
    Transport a = transport("a");
    Transport b = transport("b");
    RegisteredRegion r = filledRegion(b, 4096);
    r.resetSignal(0, 0);
    byte[] before = bytes(r);
    PeerQueue q = a.connect(b.localEndpoint());

    await(q.write(ByteBuffer.allocate(0), r.descriptor().at(100)));
    await(q.write(ByteBuffer.allocateDirect(0), r.descriptor().at(4096))); // an empty write at the very end is inside
    assertArrayEquals(before, bytes(r));

    await(q.writeAndSignal(ByteBuffer.allocate(0), r.descriptor().at(200), r.descriptor().at(0), 1));
    assertEquals(1, r.readSignal(0));
  }

  @Test
  void largeWriteArrivesByteExact() throws Exception {
    int size = 64 << 20;
    Transport a = transport("a");
    Transport b = transport("b");
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(size + 8));
    PeerQueue q = a.connect(b.localEndpoint());
    ByteBuffer src = ByteBuffer.allocateDirect(size).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < size; i += 8) {
      src.putLong(i, i * 0x9E3779B97F4A7C15L);
    }

    await(q.writeAndSignal(src, r.descriptor().at(8), r.descriptor().at(0), 1));

    assertEquals(1, r.readSignal(0));
    assertEquals(0, r.buffer().slice(8, size).compareTo(src), "64 MiB write differs");
    assertEquals(size, b.metrics().bytesReceived());
  }

  // ---------------------------------------------------------------- ordering and concurrency

  @Test
  void signalIsVisibleOnlyAfterData() throws Exception {
    int senders = 4;
    int rounds = 40;
    int chunks = 8;
    int chunk = 1024;
    int roundBytes = chunks * chunk;
    int base = 64;
    Transport b = transport("receiver");
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(base + senders * rounds * roundBytes));
    ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
    AtomicInteger signals = new AtomicInteger();
    r.setSignalListener((region, offset, value) -> {
      signals.incrementAndGet();
      int sender = (int) (offset / 8);
      int round = (int) value - 1;
      ByteBuffer mem = region.buffer();
      int start = base + (sender * rounds + round) * roundBytes;
      for (int i = 0; i < roundBytes; i++) {
        if (mem.get(start + i) != patternByte(sender * rounds + round, i)) {
          violations.add("sender " + sender + " signal " + value + ": byte " + i + " of its data not there yet");
          return;
        }
      }
    });

    ExecutorService pool = Executors.newFixedThreadPool(senders);
    try {
      List<Future<List<CompletableFuture<Void>>>> posted = new ArrayList<>();
      for (int s = 0; s < senders; s++) {
        int sender = s;
        PeerQueue q = transport("sender" + s).connect(b.localEndpoint());
        posted.add(pool.submit(() -> {
          List<CompletableFuture<Void>> fs = new ArrayList<>();
          for (int round = 0; round < rounds; round++) {
            ByteBuffer data = pattern(roundBytes, sender * rounds + round);
            int dst = base + (sender * rounds + round) * roundBytes;
            for (int c = 0; c < chunks - 1; c++) {
              fs.add(q.write(data.slice(c * chunk, chunk), r.descriptor().at(dst + c * chunk)));
            }
            int last = (chunks - 1) * chunk;
            fs.add(q.writeAndSignal(data.slice(last, chunk), r.descriptor().at(dst + last), r.descriptor().at(sender * 8L), 1));
          }
          q.commit();
          return fs;
        }));
      }
      for (Future<List<CompletableFuture<Void>>> p : posted) {
        for (CompletableFuture<Void> f : p.get(TIMEOUT_SECONDS, SECONDS)) {
          await(f);
        }
      }
    } finally {
      pool.shutdownNow();
    }
    assertEquals(List.of(), new ArrayList<>(violations));
    assertEquals(senders * rounds, signals.get(), "listener calls");
    for (int s = 0; s < senders; s++) {
      assertEquals(rounds, r.readSignal(s * 8L));
    }
  }

  @Test
  void concurrentWritersIntoDisjointRangesLandByteExact() throws Exception {
    int writers = 8;
    int range = 512 * 1024;
    int chunk = 16 * 1024;
    Transport b = transport("receiver");
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(writers * range));
    List<PeerQueue> queues = List.of(transport("s0").connect(b.localEndpoint()),
        transport("s1").connect(b.localEndpoint()));
    ExecutorService pool = Executors.newFixedThreadPool(writers);
    List<ByteBuffer> sources = new ArrayList<>();
    try {
      List<Future<List<CompletableFuture<Void>>>> posted = new ArrayList<>();
      for (int w = 0; w < writers; w++) {
        ByteBuffer src = pattern(range, w);
        sources.add(src);
        PeerQueue q = queues.get(w % 2); // four threads share each queue
        long dst = (long) w * range;
        posted.add(pool.submit(() -> {
          List<CompletableFuture<Void>> fs = new ArrayList<>();
          for (int off = 0; off < range; off += chunk) {
            fs.add(q.write(src.slice(off, chunk), r.descriptor().at(dst + off)));
          }
          return fs;
        }));
      }
      for (Future<List<CompletableFuture<Void>>> p : posted) {
        for (CompletableFuture<Void> f : p.get(TIMEOUT_SECONDS, SECONDS)) {
          await(f);
        }
      }
    } finally {
      pool.shutdownNow();
    }
    for (int w = 0; w < writers; w++) {
      assertEquals(0, r.buffer().slice(w * range, range).compareTo(sources.get(w)), "range of writer " + w);
    }
  }

  @Test
  void fetchAddIsAtomicAcrossConcurrentSenders() throws Exception {
    int senders = 4;
    int threadsPerSender = 2;
    int adds = 200;
    Transport b = transport("receiver");
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(64));
    ExecutorService pool = Executors.newFixedThreadPool(senders * threadsPerSender);
    Set<Long> olds = ConcurrentHashMap.newKeySet();
    try {
      List<Future<List<CompletableFuture<Long>>>> posted = new ArrayList<>();
      for (int s = 0; s < senders; s++) {
        PeerQueue q = transport("s" + s).connect(b.localEndpoint());
        for (int t = 0; t < threadsPerSender; t++) {
          posted.add(pool.submit(() -> {
            List<CompletableFuture<Long>> fs = new ArrayList<>();
            for (int i = 0; i < adds; i++) {
              fs.add(q.fetchAdd(r.descriptor().at(40), 1));
            }
            return fs;
          }));
        }
      }
      for (Future<List<CompletableFuture<Long>>> p : posted) {
        for (CompletableFuture<Long> f : p.get(TIMEOUT_SECONDS, SECONDS)) {
          assertTrue(olds.add(await(f)), "an old value was returned twice");
        }
      }
    } finally {
      pool.shutdownNow();
    }
    int total = senders * threadsPerSender * adds;
    assertEquals(total, r.readSignal(40));
    assertEquals(total, olds.size());
    assertTrue(olds.stream().allMatch(v -> v >= 0 && v < total), "old values outside [0, " + total + ")");
  }

  // ---------------------------------------------------------------- failures

  @Test
  void everyOperationCompletesWhenThePeerDiesMidTransfer() throws Exception {
    int size = 16 << 20;
    Transport a = transport("a");
    Transport b = transport("b");
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(size));
    EndpointDescriptor dead = b.localEndpoint();
    PeerQueue q = a.connect(dead);
    ByteBuffer src = pattern(size, 5);
    List<CompletableFuture<?>> fs = new ArrayList<>();
    AtomicInteger completions = new AtomicInteger();
    for (int i = 0; i < 8; i++) {
      fs.add(q.write(src, r.descriptor().at(0)));
      fs.add(q.writeAndSignal(src.slice(0, 1024), r.descriptor().at(0), r.descriptor().at(size - 8), 1));
      fs.add(q.fetchAdd(r.descriptor().at(8), 1));
    }
    fs.forEach(f -> f.whenComplete((v, e) -> completions.incrementAndGet()));
    q.commit();

    b.close();

    Set<TransportError> allowed = EnumSet.of(TransportError.PEER_LOST, TransportError.CLOSED, TransportError.UNKNOWN_REGION);
    for (CompletableFuture<?> f : fs) {
      TransportException e = outcome(f);
      if (e != null) {
        assertTrue(allowed.contains(e.error()), "unexpected failure " + e);
      }
    }
    assertEquals(fs.size(), completions.get());
    // New operations towards the dead peer fail too (at connect or on the future), none hangs.
    TransportException later;
    try {
      later = awaitFailure(a.connect(dead).write(src.slice(0, 16), r.descriptor().at(0)));
    } catch (TransportException e) {
      later = e;
    }
    assertTrue(allowed.contains(later.error()), "unexpected failure " + later);
  }

  @Test
  void closeDeregistersRegionsAndFailsNewOperationsWithClosed() throws Exception {
    Transport a = transport("a");
    Transport b = transport("b");
    RegisteredRegion own1 = a.register(ByteBuffer.allocateDirect(4096));
    a.register(ByteBuffer.allocateDirect(4096));
    assertEquals(2, a.registeredRegionCount());
    RegisteredRegion remote = b.register(ByteBuffer.allocateDirect(4096));
    PeerQueue q = a.connect(b.localEndpoint());
    await(q.write(pattern(10, 1), remote.descriptor().at(0)));

    a.close();

    assertEquals(0, a.registeredRegionCount());
    assertFalse(own1.isOpen());
    assertFalse(q.isOpen());
    assertError(awaitFailure(q.write(pattern(10, 1), remote.descriptor().at(0))), TransportError.CLOSED);
    assertError(awaitFailure(q.signal(remote.descriptor().at(0), 1)), TransportError.CLOSED);
    assertError(assertThrows(TransportException.class, () -> a.register(ByteBuffer.allocateDirect(64))),
        TransportError.CLOSED);
    assertError(assertThrows(TransportException.class, () -> a.connect(b.localEndpoint())), TransportError.CLOSED);
    a.close(); // idempotent
  }

  @Test
  void closedQueueFailsWithClosedAndConnectReplacesIt() throws Exception {
    Transport a = transport("a");
    Transport b = transport("b");
    RegisteredRegion r = b.register(ByteBuffer.allocateDirect(4096));
    PeerQueue q = a.connect(b.localEndpoint());
    await(q.write(pattern(10, 1), r.descriptor().at(0)));

    q.close();
    q.close(); // idempotent

    assertFalse(q.isOpen());
    assertError(awaitFailure(q.write(pattern(10, 1), r.descriptor().at(0))), TransportError.CLOSED);
    PeerQueue fresh = a.connect(b.localEndpoint());
    assertTrue(fresh.isOpen());
    await(fresh.write(pattern(10, 2), r.descriptor().at(0)));
    assertArrayEquals(bytes(pattern(10, 2)), bytes(r.buffer().slice(0, 10)));
  }

  @Test
  void regionCloseDeregistersOnce() throws Exception {
    Transport b = transport("b");
    RegisteredRegion r1 = b.register(ByteBuffer.allocateDirect(64));
    RegisteredRegion r2 = b.register(ByteBuffer.allocateDirect(64));
    assertTrue(r1.descriptor().id() != r2.descriptor().id(), "region ids must differ");
    assertEquals(2, b.registeredRegionCount());
    r1.close();
    r1.close();
    assertFalse(r1.isOpen());
    assertTrue(r2.isOpen());
    assertEquals(1, b.registeredRegionCount());
  }

  // ---------------------------------------------------------------- bad input

  /** Receiver with one 4 KiB region of 0x5a bytes, and a queue to it. */
  private final class Target {
    final Transport sender;
    final Transport receiver;
    final RegisteredRegion region;
    final RegionDescriptor d;
    final PeerQueue q;
    byte[] before;

    Target() throws Exception {
      sender = transport("sender");
      receiver = transport("receiver");
      region = filledRegion(receiver, 4096);
      d = region.descriptor();
      q = sender.connect(receiver.localEndpoint());
      before = bytes(region);
    }

    /** The operation failed with {@code error} naming {@code parts}, wrote nothing, and the queue still works. */
    void assertRejected(CompletableFuture<?> f, TransportError error, Object... parts) throws Exception {
      assertError(awaitFailure(f), error, parts);
      assertArrayEquals(before, bytes(region), "a rejected operation changed the region");
      assertTrue(receiver.metrics().rejected() >= 1, "receiver counts rejections");
      assertTrue(sender.metrics().failed() >= 1, "sender counts failures");
      ByteBuffer ok = pattern(16, 9);
      await(q.write(ok, region.descriptor().at(32)));
      assertArrayEquals(bytes(ok), bytes(region.buffer().slice(32, 16)), "queue unusable after a rejection");
      before = bytes(region);
    }
  }

  @Test
  void rejectsWriteToUnknownRegion() throws Exception {
    Target t = new Target();
    RegionDescriptor forged = new RegionDescriptor(t.d.id() + 1_000_000, 0, 4096, t.d.key(), MemoryKind.HOST, -1);
    t.assertRejected(t.q.write(pattern(16, 1), forged.at(0)), TransportError.UNKNOWN_REGION, forged.id());
  }

  @Test
  void rejectsWriteWithWrongKey() throws Exception {
    Target t = new Target();
    RegionDescriptor forged = new RegionDescriptor(t.d.id(), 0, 4096, t.d.key() ^ 0x5a5a5a5aL, MemoryKind.HOST, -1);
    t.assertRejected(t.q.write(pattern(16, 1), forged.at(0)), TransportError.BAD_KEY, t.d.id());
    t.assertRejected(t.q.fetchAdd(forged.at(0), 1), TransportError.BAD_KEY, t.d.id());
  }

  @Test
  void rejectsWriteOutsideRegion() throws Exception {
    Target t = new Target();
    t.assertRejected(t.q.write(pattern(512, 1), t.region.descriptor().at(4090)), TransportError.OUT_OF_RANGE, 4090, 512, 4096);
    t.assertRejected(t.q.write(ByteBuffer.allocate(0), t.region.descriptor().at(4097)), TransportError.OUT_OF_RANGE, 4097);
    // A descriptor that claims a longer region does not widen the receiver's bounds.
    RegionDescriptor longer = new RegionDescriptor(t.d.id(), 0, 1 << 20, t.d.key(), MemoryKind.HOST, -1);
    t.assertRejected(t.q.write(pattern(8192, 1), longer.at(0)), TransportError.OUT_OF_RANGE, 8192, 4096);
  }

  @Test
  void rejectsWriteWhoseEndOverflows() throws Exception {
    Target t = new Target();
    long offset = Long.MAX_VALUE - 3;
    t.assertRejected(t.q.write(pattern(16, 1), new RemoteAddress(t.d, offset)), TransportError.OUT_OF_RANGE, offset, 16);
    t.assertRejected(t.q.signal(new RemoteAddress(t.d, Long.MAX_VALUE - 7), 1), TransportError.OUT_OF_RANGE,
        Long.MAX_VALUE - 7);
  }

  @Test
  void rejectsMisalignedSignal() throws Exception {
    Target t = new Target();
    t.assertRejected(t.q.signal(t.region.descriptor().at(12), 1), TransportError.MISALIGNED, 12);
    t.assertRejected(t.q.fetchAdd(t.region.descriptor().at(4), 1), TransportError.MISALIGNED, 4);
    t.assertRejected(t.q.writeAndSignal(pattern(64, 1), t.region.descriptor().at(128), t.region.descriptor().at(1), 1),
        TransportError.MISALIGNED, 1);
  }

  @Test
  void rejectsSignalOutsideRegion() throws Exception {
    Target t = new Target();
    t.assertRejected(t.q.signal(t.region.descriptor().at(4096), 1), TransportError.OUT_OF_RANGE, 4096);
    t.assertRejected(t.q.writeAndSignal(pattern(64, 1), t.region.descriptor().at(0), t.region.descriptor().at(4096), 1),
        TransportError.OUT_OF_RANGE, 4096);
  }

  @Test
  void rejectsWriteAndSignalWithBadDataWithoutTouchingTheSignal() throws Exception {
    Target t = new Target();
    t.assertRejected(t.q.writeAndSignal(pattern(64, 1), t.region.descriptor().at(4064), t.region.descriptor().at(0), 1),
        TransportError.OUT_OF_RANGE, 4064, 64);
  }

  @Test
  void rejectsWriteToClosedRegion() throws Exception {
    Target t = new Target();
    RegisteredRegion closed = filledRegion(t.receiver, 256);
    byte[] closedBefore = bytes(closed);
    closed.close();
    t.assertRejected(t.q.write(pattern(16, 1), closed.descriptor().at(0)), TransportError.UNKNOWN_REGION,
        closed.descriptor().id());
    t.assertRejected(t.q.signal(closed.descriptor().at(0), 1), TransportError.UNKNOWN_REGION, closed.descriptor().id());
    assertArrayEquals(closedBefore, bytes(closed));
  }

  @Test
  void sendWithoutHandlerFails() throws Exception {
    Target t = new Target();
    assertNotNull(awaitFailure(t.q.send(pattern(8, 1))));
    await(t.q.write(pattern(16, 1), t.region.descriptor().at(0))); // the queue survives
  }

  @Test
  void failuresOfRejectedOperationsAreCountedOnce() throws Exception {
    Target t = new Target();
    List<CompletableFuture<Void>> fs = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      fs.add(t.q.write(pattern(64, i), t.region.descriptor().at(4095)));
    }
    for (CompletableFuture<Void> f : fs) {
      assertError(awaitFailure(f), TransportError.OUT_OF_RANGE);
    }
    assertEquals(10, t.receiver.metrics().rejected());
    assertEquals(10, t.sender.metrics().failed());
    assertArrayEquals(t.before, bytes(t.region));
  }
}
