package dev.slipstream.core.transport;

import java.nio.ByteBuffer;

/**
 * One process's instance of a transport mechanism: it owns the local endpoint, the registered
 * memory regions that peers may write into, and the queues to peers.
 *
 * <p>Threading: all methods are thread-safe. Inbound writes, signals and messages are applied
 * on the transport's own progress threads; {@link MessageHandler} and {@link SignalListener}
 * callbacks run there and must not block.
 *
 * <p>Ownership: the transport owns its queues and regions; {@link #close()} fails every
 * outstanding operation with {@link TransportError#CLOSED}, closes all queues and deregisters
 * all regions. Close is idempotent.
 */
public interface Transport extends AutoCloseable {

  /** The provider name, e.g. {@code "tcp"}. */
  String name();

  /** What a peer needs to {@link #connect} to this transport. */
  EndpointDescriptor localEndpoint();

  /**
   * Registers host memory so that peers holding the returned region's descriptor may write into
   * it and add to signals in it.
   *
   * @param memory a direct buffer; the region covers {@code [position, limit)}. The caller keeps
   *     the memory alive until the region is closed.
   */
  RegisteredRegion register(ByteBuffer memory) throws TransportException;

  /**
   * Returns the queue to a peer, opening it if needed. Queues are cached per peer endpoint; a
   * queue whose connection died is replaced on the next call.
   */
  PeerQueue connect(EndpointDescriptor peer) throws TransportException;

  /** Installs the handler for two-sided messages that peers {@link PeerQueue#send send}. */
  void setMessageHandler(MessageHandler handler);

  /** Counters of this transport (bytes written and received one-sided, operations, errors). */
  TransportMetrics metrics();

  /** Number of regions currently registered (tests check that nothing is left). */
  int registeredRegionCount();

  @Override
  void close();
}
