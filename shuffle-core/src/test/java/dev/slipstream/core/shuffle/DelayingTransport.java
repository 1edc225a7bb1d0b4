package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RemoteAddress;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * A holder's transport made slow, as a slow or dying peer is: each request's one-sided writes
 * (its data writes, then the block table with the signal) are held back by the delays a
 * {@link Plan} gives, in order; different requests on one queue are not ordered against each other. A delay of {@link #FOREVER} never applies the
 * operation; closing the queue fails it (as a connection that stopped moving would).
 *
 * <p>Threading: thread-safe; the operations of one request keep their order.
 */
final class DelayingTransport extends ForwardingTransport {
  /** Holds an operation until its queue is closed. */
  static final long FOREVER = Long.MAX_VALUE;

  /** How long to hold one request's data writes, and then its table and signal (milliseconds). */
  record Plan(long beforeData, long beforeSignal) {
    static final Plan NONE = new Plan(0, 0);
  }

  private final Supplier<Plan> plans;
  private final ScheduledExecutorService timer = Executors.newScheduledThreadPool(2, r -> {
    Thread t = new Thread(r, "delaying-transport");
    t.setDaemon(true);
    return t;
  });
  private final ConcurrentHashMap<EndpointDescriptor, Queue> queues = new ConcurrentHashMap<>();

  /** @param plans asked once per request (at its first write) for that request's delays */
  DelayingTransport(Transport inner, Supplier<Plan> plans) {
    super(inner);
    this.plans = plans;
  }

  @Override
  public void close() {
    queues.values().forEach(Queue::close);
    timer.shutdownNow();
    inner.close();
  }

  @Override
  public PeerQueue connect(EndpointDescriptor peer) throws TransportException {
    Queue q = queues.get(peer);
    if (q != null && q.isOpen()) {
      return q;
    }
    Queue fresh = new Queue(inner.connect(peer));
    queues.put(peer, fresh);
    return fresh;
  }

  private final class Queue implements PeerQueue {
    private final PeerQueue q;
    /** Completes when the previous operation was handed to the inner queue. */
    private CompletableFuture<Void> tail = CompletableFuture.completedFuture(null);
    private Plan current;
    private volatile boolean open = true;
    private final java.util.Set<CompletableFuture<?>> held = ConcurrentHashMap.newKeySet();

    Queue(PeerQueue q) {
      this.q = q;
    }

    private synchronized <T> CompletableFuture<T> later(boolean endsRequest, Supplier<CompletableFuture<T>> op) {
      if (current == null) {
        current = plans.get();
        tail = CompletableFuture.completedFuture(null); // requests are not ordered against each other
      }
      long delay = endsRequest ? current.beforeSignal() : current.beforeData();
      if (endsRequest) {
        current = null;
      }
      CompletableFuture<T> out = new CompletableFuture<>();
      if (!open) {
        out.completeExceptionally(new TransportException(TransportError.CLOSED, "queue to " + peer() + " closed"));
        return out;
      }
      held.add(out);
      CompletableFuture<Void> handed = new CompletableFuture<>();
      tail.whenComplete((v, e) -> {
        if (delay == FOREVER) {
          return; // never handed on: only close() completes it
        }
        timer.schedule(() -> {
          if (open) {
            op.get().whenComplete((r, err) -> {
              held.remove(out);
              if (err != null) {
                out.completeExceptionally(err);
              } else {
                out.complete(r);
              }
            });
          } else {
            held.remove(out);
            out.completeExceptionally(new TransportException(TransportError.CLOSED, "queue to " + peer() + " closed"));
          }
          handed.complete(null);
        }, delay, TimeUnit.MILLISECONDS);
      });
      tail = handed;
      return out;
    }

    @Override public EndpointDescriptor peer() { return q.peer(); }

    @Override
    public CompletableFuture<Void> write(ByteBuffer src, RemoteAddress dst) {
      return later(false, () -> q.write(src, dst));
    }

    @Override
    public CompletableFuture<Void> writeAndSignal(ByteBuffer src, RemoteAddress dst, RemoteAddress s, long d) {
      return later(true, () -> {
        CompletableFuture<Void> f = q.writeAndSignal(src, dst, s, d);
        q.commit();
        return f;
      });
    }

    @Override public CompletableFuture<Void> signal(RemoteAddress s, long d) { return q.signal(s, d); }
    @Override public CompletableFuture<Long> fetchAdd(RemoteAddress dst, long d) { return q.fetchAdd(dst, d); }
    @Override public CompletableFuture<Void> send(ByteBuffer m) { return q.send(m); }
    @Override public void commit() { q.commit(); }
    @Override public boolean isOpen() { return open && q.isOpen(); }

    @Override
    public void close() {
      List<CompletableFuture<?>> failing;
      synchronized (this) { // with later(): an operation is either refused or held when the queue closes
        open = false;
        failing = new ArrayList<>(held);
        held.clear();
      }
      for (CompletableFuture<?> f : failing) {
        f.completeExceptionally(new TransportException(TransportError.CLOSED, "queue to " + peer() + " closed"));
      }
      q.close();
    }
  }
}
