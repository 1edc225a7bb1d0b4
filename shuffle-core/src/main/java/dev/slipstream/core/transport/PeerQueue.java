package dev.slipstream.core.transport;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

/**
 * An ordered queue of one-sided operations to one peer.
 *
 * <p>Ordering: operations on one queue are applied at the receiver in the order they were
 * posted. Once the receiver observes a signal posted by {@link #writeAndSignal} or
 * {@link #signal}, every earlier write on this queue is visible in its memory.
 *
 * <p>Completion: every returned future completes exactly once: normally when the receiver has
 * applied the operation, or exceptionally with a {@link TransportException} when the receiver
 * rejected it (nothing was written), the connection died, the deadline passed or the queue was
 * closed.
 *
 * <p>Ownership: source buffers are read from their position to their limit; the caller must not
 * modify them until the returned future completes. Buffers are not consumed (positions unchanged).
 *
 * <p>Threading: all methods are thread-safe and never block on the network.
 */
public interface PeerQueue extends AutoCloseable {

  /** The peer this queue writes to. */
  EndpointDescriptor peer();

  /** Writes {@code src} into the peer's memory at {@code dst}. */
  CompletableFuture<Void> write(ByteBuffer src, RemoteAddress dst);

  /**
   * Writes {@code src} at {@code dst}, then atomically adds {@code delta} to the 8-byte signal
   * at {@code signal}; the signal becomes visible only after the data and every earlier write on
   * this queue.
   */
  CompletableFuture<Void> writeAndSignal(ByteBuffer src, RemoteAddress dst, RemoteAddress signal, long delta);

  /** Adds {@code delta} to the 8-byte signal at {@code signal}, ordered after earlier writes. */
  CompletableFuture<Void> signal(RemoteAddress signal, long delta);

  /** Atomically adds {@code delta} to the 8-byte word at {@code dst}; completes with the old value. */
  CompletableFuture<Long> fetchAdd(RemoteAddress dst, long delta);

  /**
   * Sends a two-sided control message delivered to the peer's {@link MessageHandler}, ordered
   * with the one-sided operations of this queue.
   */
  CompletableFuture<Void> send(ByteBuffer message);

  /** Makes posted operations go out now (rings the doorbell / flushes the socket). */
  void commit();

  /** False once the queue's connection is gone; a closed queue fails every new operation. */
  boolean isOpen();

  @Override
  void close();
}
