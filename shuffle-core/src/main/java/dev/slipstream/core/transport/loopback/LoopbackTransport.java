package dev.slipstream.core.transport.loopback;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MessageHandler;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RegionTable;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.TransportMetrics;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;

/**
 * A transport whose peers live in the same JVM. Operations posted to a peer run, in posting
 * order, on that peer's single progress thread, with the same checks a network receiver makes.
 *
 * <p>Threading: thread-safe; inbound operations, signal listeners and the message handler run
 * on this transport's progress thread. Ownership: {@link #close()} closes queues and regions and
 * stops the progress thread; pending inbound operations fail with CLOSED.
 */
final class LoopbackTransport implements Transport {
  private final LoopbackFabric fabric;
  private final String address;
  private final EndpointDescriptor endpoint;
  /** What this transport's messages say about their sender. */
  private final PeerIdentity identity;
  private final RegionTable regions = new RegionTable();
  private final TransportMetrics metrics = new TransportMetrics();
  private final ExecutorService progress;
  private final ConcurrentHashMap<EndpointDescriptor, LoopbackPeerQueue> queues = new ConcurrentHashMap<>();
  private volatile MessageHandler handler;
  private volatile boolean open = true;

  LoopbackTransport(LoopbackFabric fabric, String processName, String applicationId, String executorId) {
    this.fabric = fabric;
    this.address = fabric.attach(this, processName);
    this.endpoint = new EndpointDescriptor(LoopbackTransportProvider.NAME, address, null);
    this.identity = new PeerIdentity(endpoint, applicationId, executorId);
    this.progress = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "slipstream-loopback-" + address);
      t.setDaemon(true);
      return t;
    });
  }

  @Override
  public String name() {
    return LoopbackTransportProvider.NAME;
  }

  @Override
  public EndpointDescriptor localEndpoint() {
    return endpoint;
  }

  /** The endpoint, application and executor id that messages from this transport carry. */
  PeerIdentity identity() {
    return identity;
  }

  @Override
  public RegisteredRegion register(ByteBuffer memory) throws TransportException {
    checkOpen();
    return regions.register(memory);
  }

  @Override
  public PeerQueue connect(EndpointDescriptor peer) throws TransportException {
    checkOpen();
    if (!LoopbackTransportProvider.NAME.equals(peer.transport())) {
      throw new TransportException(TransportError.MALFORMED,
          "cannot connect loopback to a '" + peer.transport() + "' endpoint, expected 'loopback'");
    }
    LoopbackPeerQueue q = queues.get(peer);
    if (q != null && q.isOpen()) {
      return q;
    }
    LoopbackTransport target = fabric.find(peer.address());
    LoopbackPeerQueue fresh = new LoopbackPeerQueue(this, target);
    queues.put(peer, fresh);
    return fresh;
  }

  @Override
  public void setMessageHandler(MessageHandler handler) {
    this.handler = handler;
  }

  MessageHandler handler() {
    return handler;
  }

  RegionTable regions() {
    return regions;
  }

  @Override
  public TransportMetrics metrics() {
    return metrics;
  }

  @Override
  public int registeredRegionCount() {
    return regions.size();
  }

  boolean isOpen() {
    return open;
  }

  /** Runs an inbound operation on the progress thread; false when this transport is closed. */
  boolean execute(Runnable op) {
    if (!open) {
      return false;
    }
    try {
      progress.execute(op);
      return true;
    } catch (RejectedExecutionException e) {
      return false;
    }
  }

  private void checkOpen() throws TransportException {
    if (!open) {
      throw new TransportException(TransportError.CLOSED, "loopback transport " + address + " is closed");
    }
  }

  @Override
  public void close() {
    if (!open) {
      return;
    }
    open = false;
    fabric.detach(address);
    List<LoopbackPeerQueue> qs = new ArrayList<>(queues.values());
    qs.forEach(LoopbackPeerQueue::close);
    queues.clear();
    // Inbound operations still queued fail with CLOSED: they run and see open == false.
    progress.shutdown();
    regions.closeAll();
  }

  @Override
  public String toString() {
    return "loopback://" + address;
  }
}
