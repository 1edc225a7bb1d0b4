package dev.slipstream.core.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Write requests whose sender waits for the holder's answer, served or not
 * ({@link WriteRequest#ANSWER_SERVED}): a GPU reader's requests into its device landing region,
 * whose answer tells it the holder's push has ended. They are the same {@link WriteRequest}s the
 * host path sends and the holder's {@link BlockServer} serves them alike; this class keeps the
 * sender's side: {@link #send} posts a request to the holder, or writes it into the holder's
 * {@link RequestRing} when both share a machine, and the holder's {@link WriteResult} completes it.
 * The holder's side of a ring ({@link #serveRing}) hands what it reads to the block server as if
 * it had come over the transport.
 *
 * <p>Every request sent completes exactly once: with the holder's answer (only from the endpoint
 * it was sent to), a failed send, the timeout, the holder's loss ({@link #peerLost}) or
 * {@link #close()}. Threading: thread-safe; answers arrive on transport threads.
 */
public final class WriteExchange {
  private static final Logger LOG = LoggerFactory.getLogger(WriteExchange.class);
  static final byte RING_REQUEST = 52;
  /** Largest write request a ring message carries (a request this large goes over the transport anyway). */
  static final int MAX_RING_REQUEST = 4 << 20;

  private record Pending(EndpointDescriptor holder, CompletableFuture<WriteResult> done) {}

  private final Transport transport;
  private final ScheduledExecutorService timer;
  private final Duration timeout;
  private final String name;
  private final BiConsumer<PeerIdentity, WriteRequest> server;
  private final ConcurrentHashMap<Long, Pending> pending = new ConcurrentHashMap<>();
  private final AtomicLong sent = new AtomicLong();
  private final AtomicLong sentByRing = new AtomicLong();
  private final AtomicLong ringDropped = new AtomicLong();
  private volatile Thread ringPoller;
  private volatile boolean closed;

  /** @param server serves a request read from this node's request ring, as from that sender */
  WriteExchange(Transport transport, ScheduledExecutorService timer, Duration timeout, String name,
                BiConsumer<PeerIdentity, WriteRequest> server) {
    this.transport = transport;
    this.timer = timer;
    this.timeout = timeout;
    this.name = name;
    this.server = server;
  }

  /**
   * Sends {@code request} to {@code holder}; the future completes with its answer, or fails with a
   * {@link TransportException} (the send failed, TIMEOUT after the node's fetch timeout, PEER_LOST,
   * CLOSED).
   */
  public CompletableFuture<WriteResult> send(EndpointDescriptor holder, WriteRequest request) {
    return send(holder, request, null, timeout);
  }

  /**
   * Sends {@code request} (which must ask for an answer when served, and carry a request id of this
   * node's, {@link ShuffleNode#nextRequestId()}) to {@code holder}, written into the holder's
   * {@link RequestRing} when {@code ring} is not null and takes it (a request larger than a slot, a
   * full ring, or a slot taken back go over the transport instead); the answer comes over the
   * transport either way, and is waited for {@code answerWithin}: a GPU reader keeps listening past
   * its own fetch deadline, since the holder's answer is what tells it the holder's push has ended.
   */
  public CompletableFuture<WriteResult> send(EndpointDescriptor holder, WriteRequest request, RequestRing.Producer ring,
                                             Duration answerWithin) {
    if (!request.answerServed()) {
      throw new IllegalArgumentException(request + " does not ask for an answer when served (flag "
          + WriteRequest.ANSWER_SERVED + "); its sender waits for its signal instead");
    }
    long id = request.requestId();
    Pending p = new Pending(holder, new CompletableFuture<>());
    if (closed) {
      p.done().completeExceptionally(new TransportException(TransportError.CLOSED, "shuffle node is closed"));
      return p.done();
    }
    if (pending.putIfAbsent(id, p) != null) {
      throw new IllegalArgumentException("write request " + id + " is already waiting for an answer: request ids"
          + " come from ShuffleNode.nextRequestId()");
    }
    if (closed) { // close() ran between the check above and the put: it may not have seen this request
      fail(id, new TransportException(TransportError.CLOSED, "shuffle node is closed"));
      return p.done();
    }
    try {
      ScheduledFuture<?> deadline = timer.schedule(() -> fail(id, new TransportException(TransportError.TIMEOUT,
          "holder " + holder + " did not answer write request " + id + " within " + answerWithin.toMillis() + " ms")),
          answerWithin.toNanos(), TimeUnit.NANOSECONDS);
      p.done().whenComplete((v, e) -> deadline.cancel(false));
    } catch (RejectedExecutionException e) {
      fail(id, new TransportException(TransportError.CLOSED, "shuffle node is closing"));
      return p.done();
    }
    byte[] bytes = request.toBytes();
    if (ring != null && ring.offer(ringMessage(transport.localEndpoint(), bytes))) {
      sent.incrementAndGet();
      sentByRing.incrementAndGet();
      return p.done();
    }
    try {
      PeerQueue q = transport.connect(holder);
      q.send(java.nio.ByteBuffer.wrap(bytes)).whenComplete((v, err) -> {
        if (err != null) {
          fail(id, err.getCause() != null ? err.getCause() : err);
        }
      });
      q.commit();
      sent.incrementAndGet();
    } catch (TransportException e) {
      fail(id, e);
    }
    return p.done();
  }

  /** Completes the request {@code r} answers, if this side waits for it from {@code from}; false otherwise. */
  boolean onResult(EndpointDescriptor from, WriteResult r) {
    Pending p = pending.get(r.requestId());
    if (p == null || !p.holder().equals(from)) {
      return false;
    }
    if (pending.remove(r.requestId(), p)) {
      p.done().complete(r);
    }
    return true;
  }

  private void fail(long id, Throwable cause) {
    Pending p = pending.remove(id);
    if (p != null) {
      p.done().completeExceptionally(cause);
    }
  }

  /** Fails every request waiting on {@code holder} (it left the cluster). */
  void peerLost(EndpointDescriptor holder, String why) {
    pending.forEach((id, p) -> {
      if (p.holder().equals(holder)) {
        fail(id, new TransportException(TransportError.PEER_LOST, "holder " + holder + " was lost: " + why));
      }
    });
  }

  /** What a ring carries: the sender's endpoint (the answer goes there over the transport), then the request. */
  static byte[] ringMessage(EndpointDescriptor from, byte[] request) {
    WireWriter w = new WireWriter(64 + request.length);
    w.putHeader(RING_REQUEST);
    from.encode(w);
    w.putBytes(request);
    return w.toByteArray();
  }

  /**
   * Serves requests written into {@code ring} by readers of this machine, as if they had come over
   * the transport: a thread polls it back to back for {@code pollNanos} after each request, then
   * with pauses of up to {@value RequestRing#PAUSE_MAX_US} us ({@link RequestRing#serve}). A message
   * that does not decode, or whose sender is not a peer {@code knownPeer} accepts, is dropped
   * (logged; its sender times out). The block server then admits the request as any other. The ring
   * is closed (its file deleted) with this exchange.
   */
  public synchronized void serveRing(RequestRing ring, long pollNanos, Predicate<EndpointDescriptor> knownPeer) {
    if (ringPoller != null) {
      throw new IllegalStateException("write exchange " + name + " already serves a request ring");
    }
    Thread t = new Thread(() -> pollRing(ring, pollNanos, knownPeer), "slipstream-request-ring-" + name);
    t.setDaemon(true);
    ringPoller = t;
    t.start();
  }

  private void pollRing(RequestRing ring, long pollNanos, Predicate<EndpointDescriptor> knownPeer) {
    try {
      ring.serve(pollNanos, () -> closed, m -> {
        try {
          WireReader r = new WireReader(m);
          r.expectHeader(RING_REQUEST, "ring write request");
          EndpointDescriptor from = EndpointDescriptor.decode(r);
          WriteRequest request = ShuffleMessages.decodeRequest(r.getBytes("write request", MAX_RING_REQUEST));
          r.expectEnd("ring write request");
          if (!knownPeer.test(from)) {
            ringDropped.incrementAndGet();
            LOG.warn("Dropped write request {} from the request ring: sender {} is not a known peer",
                request.requestId(), from);
            return;
          }
          server.accept(PeerIdentity.of(from), request);
        } catch (TransportException | RuntimeException e) {
          ringDropped.incrementAndGet();
          LOG.warn("Dropped a message of the request ring: {}", e.getMessage());
        }
      });
    } finally {
      try {
        ring.close();
      } catch (java.io.IOException e) {
        LOG.warn("Could not delete request ring {}: {}", ring.path(), e.getMessage());
      }
    }
  }

  /** Fails every request still waiting; later sends fail at once. */
  void close() {
    closed = true;
    pending.keySet().forEach(id -> fail(id, new TransportException(TransportError.CLOSED, "shuffle node is closing")));
  }

  /** Requests sent, requests still waiting. */
  public long sent() {
    return sent.get();
  }

  public int waiting() {
    return pending.size();
  }

  /** Requests this side wrote into a holder's ring, and ring messages it dropped as a holder. */
  public long sentByRing() {
    return sentByRing.get();
  }

  public long ringDropped() {
    return ringDropped.get();
  }
}
