package dev.slipstream.core.transport.loopback;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.HostRegion;
import dev.slipstream.core.transport.MessageHandler;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RemoteAddress;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A queue from one loopback transport to another. Each operation is posted to the target's
 * progress thread, so operations of one queue apply in order and a signal follows its data.
 *
 * <p>Threading: thread-safe. Every future completes exactly once; {@link #close()} fails those
 * not yet applied with CLOSED.
 */
final class LoopbackPeerQueue implements PeerQueue {
  private final LoopbackTransport source;
  private final LoopbackTransport target;
  private final Set<CompletableFuture<?>> pending = Collections.newSetFromMap(new ConcurrentHashMap<>());
  private volatile boolean open = true;

  LoopbackPeerQueue(LoopbackTransport source, LoopbackTransport target) {
    this.source = source;
    this.target = target;
  }

  @Override
  public EndpointDescriptor peer() {
    return target.localEndpoint();
  }

  @FunctionalInterface
  private interface Op<T> {
    T apply() throws TransportException;
  }

  private <T> CompletableFuture<T> post(Op<T> op, long bytes, boolean isSignal) {
    CompletableFuture<T> f = new CompletableFuture<>();
    if (!open || !source.isOpen()) {
      f.completeExceptionally(new TransportException(TransportError.CLOSED, "queue to " + peer() + " is closed"));
      source.metrics().onFailed();
      return f;
    }
    pending.add(f);
    boolean posted = target.execute(() -> {
      if (!pending.remove(f)) {
        return; // already failed by close()
      }
      try {
        if (!target.isOpen()) {
          throw new TransportException(TransportError.PEER_LOST, "peer " + peer() + " closed");
        }
        T result = op.apply();
        if (bytes >= 0) {
          source.metrics().onWriteCompleted(bytes);
        }
        if (isSignal) {
          source.metrics().onSignalCompleted();
        }
        f.complete(result);
      } catch (TransportException e) {
        if (e.error() != TransportError.PEER_LOST) {
          target.metrics().onRejected();
        }
        source.metrics().onFailed();
        f.completeExceptionally(e);
      } catch (RuntimeException e) {
        source.metrics().onFailed();
        f.completeExceptionally(new TransportException(TransportError.INTERNAL, e.toString(), e));
      }
    });
    if (!posted && pending.remove(f)) {
      source.metrics().onFailed();
      f.completeExceptionally(new TransportException(TransportError.PEER_LOST, "peer " + peer() + " is closed"));
    }
    return f;
  }

  private void applyWrite(ByteBuffer src, RemoteAddress dst) throws TransportException {
    int len = src.remaining();
    HostRegion r = target.regions().checkWrite(dst.region().id(), dst.region().key(), dst.offset(), len);
    enter(r);
    try {
      r.put(dst.offset(), src);
    } finally {
      r.endAccess();
    }
    target.metrics().onWriteReceived(len);
  }

  /** Adds to a signal inside a region access, then tells the listener (outside it). */
  private static void applySignal(HostRegion r, long offset, long delta) throws TransportException {
    enter(r);
    long now;
    try {
      now = r.getAndAdd(offset, delta) + delta;
    } finally {
      r.endAccess();
    }
    r.notifySignal(offset, now);
  }

  /**
   * Starts an access to {@code r}; the region's owner may close it from another thread at any
   * time, and once its close returns nothing may land in it.
   */
  private static void enter(HostRegion r) throws TransportException {
    if (!r.beginAccess()) {
      throw new TransportException(TransportError.UNKNOWN_REGION,
          "region " + r.descriptor().id() + " was deregistered while the operation arrived");
    }
  }

  @Override
  public CompletableFuture<Void> write(ByteBuffer src, RemoteAddress dst) {
    ByteBuffer s = src.duplicate();
    return post(() -> {
      applyWrite(s, dst);
      return null;
    }, s.remaining(), false);
  }

  @Override
  public CompletableFuture<Void> writeAndSignal(ByteBuffer src, RemoteAddress dst, RemoteAddress signal, long delta) {
    ByteBuffer s = src.duplicate();
    return post(() -> {
      // Check both before writing anything, so a bad signal leaves the data untouched too.
      target.regions().checkWrite(dst.region().id(), dst.region().key(), dst.offset(), s.remaining());
      HostRegion sr = target.regions().checkAtomic(signal.region().id(), signal.region().key(), signal.offset());
      applyWrite(s, dst);
      applySignal(sr, signal.offset(), delta);
      return null;
    }, s.remaining(), true);
  }

  @Override
  public CompletableFuture<Void> signal(RemoteAddress signal, long delta) {
    return post(() -> {
      HostRegion sr = target.regions().checkAtomic(signal.region().id(), signal.region().key(), signal.offset());
      applySignal(sr, signal.offset(), delta);
      return null;
    }, -1, true);
  }

  @Override
  public CompletableFuture<Long> fetchAdd(RemoteAddress dst, long delta) {
    return post(() -> {
      HostRegion r = target.regions().checkAtomic(dst.region().id(), dst.region().key(), dst.offset());
      enter(r);
      try {
        return r.getAndAdd(dst.offset(), delta);
      } finally {
        r.endAccess();
      }
    }, -1, false);
  }

  @Override
  public CompletableFuture<Void> send(ByteBuffer message) {
    ByteBuffer copy = ByteBuffer.allocate(message.remaining());
    copy.put(message.duplicate()).flip();
    PeerIdentity from = source.identity();
    CompletableFuture<Void> f = post(() -> {
      MessageHandler h = target.handler();
      if (h == null) {
        throw new TransportException(TransportError.UNKNOWN_TYPE,
            "peer " + peer() + " has no message handler installed");
      }
      target.metrics().onMessageReceived();
      h.onMessage(from, copy.asReadOnlyBuffer());
      return null;
    }, -1, false);
    f.thenRun(() -> source.metrics().onMessageSent());
    return f;
  }

  @Override
  public void commit() {
    // Operations are posted to the peer immediately.
  }

  @Override
  public boolean isOpen() {
    return open && source.isOpen() && target.isOpen();
  }

  @Override
  public void close() {
    open = false;
    for (CompletableFuture<?> f : pending) {
      if (pending.remove(f)) {
        source.metrics().onFailed();
        f.completeExceptionally(new TransportException(TransportError.CLOSED, "queue to " + peer() + " closed"));
      }
    }
  }
}
