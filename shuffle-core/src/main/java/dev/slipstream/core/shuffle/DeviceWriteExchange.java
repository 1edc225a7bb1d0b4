package dev.slipstream.core.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.DeviceWrite;
import dev.slipstream.core.shuffle.ShuffleMessages.DeviceWriteResult;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * GPU shuffle device write requests sent executor to executor over the shuffle
 * transport's message path, as the host path sends its {@code WriteRequest}s: {@link #send} posts a {@link DeviceWrite} to the holder's endpoint; the
 * holder's {@link Handler} serves it and answers with a {@link DeviceWriteResult} on its own queue
 * to the sender. The request bytes are opaque here (the GPU codec checks them).
 *
 * <p>Every request sent completes exactly once: with the holder's answer (only from the endpoint
 * it was sent to), a failed send, the timeout, the holder's loss ({@link #peerLost}) or
 * {@link #close()}. Threading: thread-safe; answers and requests arrive on transport threads, a
 * handler must not wait on them (for other messages, locks held long, or a device to finish): it
 * may do bounded work there, such as launching a push, and answer later from another thread.
 */
public final class DeviceWriteExchange {
  private static final Logger LOG = LoggerFactory.getLogger(DeviceWriteExchange.class);

  /** Serves a peer's device write request; answers through {@code reply} (the first answer counts). */
  @FunctionalInterface
  public interface Handler {
    void serve(EndpointDescriptor from, byte[] request, Reply reply);
  }

  /**
   * The holder's answer: pushed ({@code ok}, block bytes pushed), or refused with the reason, and
   * when it was served (its {@code answered} instant is set here, as it goes to the transport).
   */
  @FunctionalInterface
  public interface Reply {
    void answer(boolean ok, long bytes, String reason, ServeTimeline timeline);
  }

  private record Pending(EndpointDescriptor holder, CompletableFuture<DeviceWriteResult> done) {}

  private final Transport transport;
  private final ScheduledExecutorService timer;
  private final Duration timeout;
  private final String name;
  private final ConcurrentHashMap<Long, Pending> pending = new ConcurrentHashMap<>();
  private final AtomicLong nextId = new AtomicLong(1);
  private final AtomicLong sent = new AtomicLong();
  private final AtomicLong served = new AtomicLong();
  private final AtomicLong sentByRing = new AtomicLong();
  private final AtomicLong ringDropped = new AtomicLong();
  private volatile Thread ringPoller;
  private volatile Handler handler;
  private volatile boolean closed;

  DeviceWriteExchange(Transport transport, ScheduledExecutorService timer, Duration timeout, String name) {
    this.transport = transport;
    this.timer = timer;
    this.timeout = timeout;
    this.name = name;
  }

  /** Serves peers' requests with {@code h} (until then they are refused with the reason). */
  public void setHandler(Handler h) {
    this.handler = h;
  }

  /**
   * Sends {@code request} to {@code holder}; the future completes with its answer, or fails with a
   * {@link TransportException} (the send failed, TIMEOUT after the timeout, PEER_LOST, CLOSED).
   */
  public CompletableFuture<DeviceWriteResult> send(EndpointDescriptor holder, byte[] request) {
    return send(holder, request, null);
  }

  /**
   * As {@link #send(EndpointDescriptor, byte[])}, written into the holder's {@link RequestRing}
   * when {@code ring} is not null and takes it (a request larger than a slot, a full ring, or a slot
   * taken back go over the transport instead); the answer comes over the transport either way.
   */
  public CompletableFuture<DeviceWriteResult> send(EndpointDescriptor holder, byte[] request,
      RequestRing.Producer ring) {
    return send(holder, request, ring, timeout);
  }

  /**
   * As {@link #send(EndpointDescriptor, byte[], RequestRing.Producer)}, waiting {@code answerWithin}
   * for the answer instead of the exchange's timeout: a GPU reader keeps listening past its own
   * fetch deadline, since the holder's answer is what tells it the holder's push has ended.
   */
  public CompletableFuture<DeviceWriteResult> send(EndpointDescriptor holder, byte[] request,
      RequestRing.Producer ring, Duration answerWithin) {
    long id = nextId.getAndIncrement();
    Pending p = new Pending(holder, new CompletableFuture<>());
    if (closed) {
      p.done().completeExceptionally(new TransportException(TransportError.CLOSED, "shuffle node is closed"));
      return p.done();
    }
    pending.put(id, p);
    if (closed) { // close() ran between the check above and the put: it may not have seen this request
      fail(id, new TransportException(TransportError.CLOSED, "shuffle node is closed"));
      return p.done();
    }
    try {
      java.util.concurrent.ScheduledFuture<?> deadline = timer.schedule(() -> fail(id, new TransportException(
          TransportError.TIMEOUT, "holder " + holder + " did not answer device write " + id + " within "
          + answerWithin.toMillis() + " ms")), answerWithin.toNanos(), TimeUnit.NANOSECONDS);
      p.done().whenComplete((v, e) -> deadline.cancel(false));
    } catch (java.util.concurrent.RejectedExecutionException e) {
      fail(id, new TransportException(TransportError.CLOSED, "shuffle node is closing"));
      return p.done();
    }
    if (ring != null && ring.offer(ringMessage(transport.localEndpoint(), id, request))) {
      sent.incrementAndGet();
      sentByRing.incrementAndGet();
      return p.done();
    }
    try {
      PeerQueue q = transport.connect(holder);
      q.send(new DeviceWrite(id, request).encode()).whenComplete((v, err) -> {
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

  void onRequest(EndpointDescriptor from, DeviceWrite m) {
    Handler h = handler;
    if (h == null) {
      reply(from, new DeviceWriteResult(m.id(), false, 0, "executor " + name
          + " serves no device write requests (no GPU path)"));
      return;
    }
    java.util.concurrent.atomic.AtomicBoolean once = new java.util.concurrent.atomic.AtomicBoolean();
    try {
      h.serve(from, m.request(), (ok, bytes, reason, timeline) -> {
        if (once.compareAndSet(false, true)) {
          reply(from, new DeviceWriteResult(m.id(), ok, bytes, reason, timeline.answeredAt(System.nanoTime())));
        }
      });
    } catch (RuntimeException e) {
      if (once.compareAndSet(false, true)) {
        reply(from, new DeviceWriteResult(m.id(), false, 0, "serving device write " + m.id() + ": " + e));
      }
    }
  }

  void onResult(EndpointDescriptor from, DeviceWriteResult r) {
    Pending p = pending.get(r.id());
    if (p == null || !p.holder().equals(from)) {
      LOG.debug("Dropped an answer to device write {} from {}: not waiting for it from there", r.id(), from);
      return;
    }
    if (pending.remove(r.id(), p)) {
      p.done().complete(r);
    }
  }

  private void reply(EndpointDescriptor to, DeviceWriteResult r) {
    served.incrementAndGet();
    try {
      PeerQueue q = transport.connect(to);
      q.send(r.encode());
      q.commit();
    } catch (TransportException e) {
      LOG.warn("Could not answer device write {} to {}: {}", r.id(), to, e.getMessage());
    }
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
  static byte[] ringMessage(EndpointDescriptor from, long id, byte[] request) {
    WireWriter w = new WireWriter(64 + request.length);
    w.putHeader(RING_REQUEST);
    from.encode(w);
    w.putLong(id).putBytes(request);
    return w.toByteArray();
  }

  static final byte RING_REQUEST = 52;

  /**
   * Serves requests written into {@code ring} by readers of this machine, as if they had come over
   * the transport: a thread polls it back to back for {@code pollNanos} after each request, then
   * with pauses of up to {@value RequestRing#PAUSE_MAX_US} us ({@link RequestRing#serve}). A message that does not decode, or whose
   * sender is not a peer {@code knownPeer} accepts, is dropped (logged; its sender times out). The
   * ring is closed (its file deleted) with this exchange.
   */
  public synchronized void serveRing(RequestRing ring, long pollNanos,
      java.util.function.Predicate<EndpointDescriptor> knownPeer) {
    if (ringPoller != null) {
      throw new IllegalStateException("device write exchange " + name + " already serves a request ring");
    }
    Thread t = new Thread(() -> pollRing(ring, pollNanos, knownPeer), "slipstream-gpu-request-ring-" + name);
    t.setDaemon(true);
    ringPoller = t;
    t.start();
  }

  private void pollRing(RequestRing ring, long pollNanos, java.util.function.Predicate<EndpointDescriptor> knownPeer) {
    try {
      ring.serve(pollNanos, () -> closed, m -> {
        try {
          WireReader r = new WireReader(m);
          r.expectHeader(RING_REQUEST, "ring device write");
          EndpointDescriptor from = EndpointDescriptor.decode(r);
          long id = r.getLong("device write id");
          byte[] request = r.getBytes("device write request", ShuffleMessages.MAX_DEVICE_REQUEST);
          r.expectEnd("ring device write");
          if (!knownPeer.test(from)) {
            ringDropped.incrementAndGet();
            LOG.warn("Dropped device write {} from the request ring: sender {} is not a known peer", id, from);
            return;
          }
          onRequest(from, new DeviceWrite(id, request));
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

  /** Requests sent, answers given (served or refused), requests still waiting. */
  public long sent() {
    return sent.get();
  }

  public long answered() {
    return served.get();
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
