package dev.slipstream.core.shuffle;

import dev.slipstream.core.config.CoreConfig;
import dev.slipstream.core.memory.MemoryPool;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteFailure;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.RegisteredRegion;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One process's part in the shuffle protocol: its transport, map-output store, landing pool and
 * block server, plus the registry of write requests it is waiting for.
 *
 * <p>Protocol (pull-driven writes): the reader reserves landing space and sends the holder a
 * {@link WriteRequest}; the holder writes the block ranges one-sided into the landing region and
 * adds the byte count to the request's signal slot; the reader consumes after the signal. A
 * holder that cannot serve answers with a {@link WriteFailure}. GPU shuffles' device write
 * requests travel the same message path ({@link #deviceWrites()}).
 *
 * <p>Threading: thread-safe. Ownership: the node owns everything it creates; {@link #close()}
 * fails pending requests, stops the server, closes the store, deregisters landing memory and
 * closes the transport.
 */
public final class ShuffleNode implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ShuffleNode.class);

  private final Transport transport;
  private final CoreConfig config;
  private final MemoryPool rootPool;
  private final MemoryPool landingAccount;
  private final MapOutputStore store;
  private final LandingPool landing;
  private final ByteBuffer landingMemory;
  /** Per-shuffle registrations of the landing memory: each shuffle's writes carry its own key. */
  private final ConcurrentHashMap<Integer, RegisteredRegion> shuffleLanding = new ConcurrentHashMap<>();
  private final BlockServer server;
  private final ScheduledExecutorService timer;
  private final ConcurrentHashMap<Long, PendingRequest> pending = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<Long, PendingRequest> bySignal = new ConcurrentHashMap<>();
  private final AtomicLong nextRequestId = new AtomicLong(1);
  private final AtomicLong requestsSent = new AtomicLong();
  private final AtomicLong requestsFailed = new AtomicLong();
  private final AtomicLong bytesFetched = new AtomicLong();
  private final AtomicLong malformedMessages = new AtomicLong();
  private final AtomicLong checksumRetries = new AtomicLong();
  private final DeviceWriteExchange deviceWrites;
  private volatile boolean closed;

  public ShuffleNode(Transport transport, CoreConfig config, Path spillDir, String name) throws TransportException {
    this.transport = transport;
    this.config = config;
    this.rootPool = MemoryPool.root("slipstream-" + name, config.mapOutputMemory() + config.landingBytes());
    this.store = new MapOutputStore(transport, rootPool.child("map-output", config.mapOutputMemory()),
        config.segmentBytes(), config.pageBytes(), spillDir, config.checksum());
    this.landingAccount = rootPool.child("landing", config.landingBytes());
    if (!landingAccount.tryReserve(config.landingBytes())) {
      throw new IllegalStateException("landing pool does not fit its own budget");
    }
    this.landingMemory = ByteBuffer.allocateDirect((int) config.landingBytes());
    RegisteredRegion region = transport.register(landingMemory);
    this.landing = new LandingPool(region);
    region.setSignalListener(this::onSignal);
    this.server = new BlockServer(transport, store, config.serverThreads(), name);
    java.util.concurrent.ScheduledThreadPoolExecutor t0 = new java.util.concurrent.ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, "slipstream-timer-" + name);
      t.setDaemon(true);
      return t;
    });
    t0.setRemoveOnCancelPolicy(true); // a completed request's deadline leaves the queue at once
    this.timer = t0;
    this.deviceWrites = new DeviceWriteExchange(transport, timer, config.fetchTimeout(), name);
    transport.setMessageHandler(this::onMessage);
  }

  public Transport transport() { return transport; }
  public MapOutputStore store() { return store; }
  public LandingPool landing() { return landing; }
  public CoreConfig config() { return config; }
  public EndpointDescriptor localEndpoint() { return transport.localEndpoint(); }
  /** GPU device write requests to and from peers, over this node's transport. */
  public DeviceWriteExchange deviceWrites() { return deviceWrites; }

  /**
   * Serves write requests for map outputs that {@code source} has and the map-output store has
   * not (GPU map outputs read by reducers without a direct device path), on the server's threads.
   */
  public void serveAlso(ServedOutput.Source source) {
    server.serveAlso(source);
  }

  private void onMessage(EndpointDescriptor from, ByteBuffer message) {
    ShuffleMessages.Message m;
    try {
      m = ShuffleMessages.decode(message);
    } catch (TransportException e) {
      malformedMessages.incrementAndGet();
      LOG.warn("Dropped a malformed shuffle message from {}: {}", from, e.getMessage());
      return;
    }
    if (m instanceof WriteRequest req) {
      server.submit(from, req);
    } else if (m instanceof ShuffleMessages.DeviceWrite d) {
      deviceWrites.onRequest(from, d);
    } else if (m instanceof ShuffleMessages.DeviceWriteResult r) {
      deviceWrites.onResult(from, r);
    } else if (m instanceof WriteFailure f) {
      PendingRequest p = pending.get(f.requestId());
      if (p != null && p.holder.equals(from)) {
        fail(p, new TransportException(f.error(), "holder " + from + " could not serve request "
            + f.requestId() + ": " + f.reason()));
      }
    }
  }

  private void onSignal(RegisteredRegion region, long offset, long value) {
    PendingRequest p = bySignal.get(offset);
    if (p != null && value >= p.expected) {
      if (value != p.expected) {
        fail(p, new TransportException(TransportError.INTERNAL, "request " + p.requestId + " signalled "
            + value + " entries, expected " + p.expected));
        return;
      }
      if (remove(p)) {
        p.done.complete(null);
      }
    }
  }

  private boolean remove(PendingRequest p) {
    bySignal.remove(p.signalOffset, p);
    return pending.remove(p.requestId, p);
  }

  private void fail(PendingRequest p, Throwable cause) {
    if (remove(p)) {
      requestsFailed.incrementAndGet();
      p.done.completeExceptionally(cause);
    }
  }

  /**
   * Sends a write request for {@code entries} to {@code holder}; the signal slot is the 8 bytes
   * at {@code signalOffset} of the landing region, reset here before sending.
   */
  PendingRequest send(EndpointDescriptor holder, int shuffleId, List<ShuffleMessages.Entry> entries,
                      long lengthsOffset, long signalOffset) {
    long id = nextRequestId.getAndIncrement();
    RegionDescriptor target;
    try {
      target = landingFor(shuffleId);
    } catch (TransportException e) {
      PendingRequest failed = new PendingRequest(id, holder, signalOffset, entries.size(), System.nanoTime());
      failed.done.completeExceptionally(e);
      return failed;
    }
    WriteRequest req = new WriteRequest(id, shuffleId, target, lengthsOffset, signalOffset, entries);
    long deadline = System.nanoTime() + config.fetchTimeout().toNanos();
    PendingRequest p = new PendingRequest(id, holder, signalOffset, entries.size(), deadline);
    if (closed) {
      p.done.completeExceptionally(new TransportException(TransportError.CLOSED, "shuffle node is closed"));
      return p;
    }
    landing.region().resetSignal(signalOffset, 0);
    pending.put(id, p);
    bySignal.put(signalOffset, p);
    java.util.concurrent.ScheduledFuture<?> deadlineTask = timer.schedule(() -> fail(p, new TransportException(
        TransportError.TIMEOUT, "holder " + holder + " did not complete request " + id + " (" + entries.size()
        + " blocks) within " + config.fetchTimeout().toMillis() + " ms")), config.fetchTimeout().toNanos(),
        TimeUnit.NANOSECONDS);
    p.done.whenComplete((v, e) -> deadlineTask.cancel(false));
    try {
      PeerQueue q = transport.connect(holder);
      q.send(req.encode()).whenComplete((v, err) -> {
        if (err != null) {
          fail(p, err.getCause() != null ? err.getCause() : err);
        }
      });
      q.commit();
      requestsSent.incrementAndGet();
    } catch (TransportException e) {
      fail(p, e);
    }
    return p;
  }

  /**
   * The landing region as registered for one shuffle: the same memory as every other shuffle's,
   * under its own region id and key, so a write still in flight for a shuffle that was
   * unregistered is rejected by the transport and writes nothing.
   */
  public RegionDescriptor landingFor(int shuffleId) throws TransportException {
    RegisteredRegion r = shuffleLanding.get(shuffleId);
    if (r != null) {
      return r.descriptor();
    }
    synchronized (shuffleLanding) {
      r = shuffleLanding.get(shuffleId);
      if (r == null) {
        if (closed) {
          throw new TransportException(TransportError.CLOSED, "shuffle node is closed");
        }
        r = transport.register(landingMemory.duplicate().clear());
        r.setSignalListener(this::onSignal);
        shuffleLanding.put(shuffleId, r);
      }
      return r.descriptor();
    }
  }

  /** Frees a shuffle's map output and revokes its landing key. */
  public void removeShuffle(int shuffleId) {
    store.removeShuffle(shuffleId);
    RegisteredRegion r;
    synchronized (shuffleLanding) {
      r = shuffleLanding.remove(shuffleId);
    }
    if (r != null) {
      r.close();
    }
  }

  /** Fails every request waiting on {@code holder} (it left the cluster). */
  public void peerLost(EndpointDescriptor holder, String why) {
    deviceWrites.peerLost(holder, why);
    for (PendingRequest p : pending.values()) {
      if (p.holder.equals(holder)) {
        fail(p, new TransportException(TransportError.PEER_LOST, "holder " + holder + " was lost: " + why));
      }
    }
  }

  /** Frees a landing range later, after the deadline of a write that may still arrive into it. */
  void quarantine(LandingPool.Range range) {
    try {
      timer.schedule(range::free, config.fetchTimeout().toMillis(), TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      range.free();
    }
  }

  /** Starts fetching {@code plan} for one reduce task. */
  public BlockFetcher newFetcher(int shuffleId, List<BlockFetcher.HolderPlan> plan, FetchMetrics metrics) {
    return new BlockFetcher(this, shuffleId, plan, config.maxBytesInFlight(), config.maxRequestBytes(), metrics);
  }

  public long requestsSent() { return requestsSent.get(); }
  public long requestsFailed() { return requestsFailed.get(); }
  public long bytesFetched() { return bytesFetched.get(); }

  void onChecksumRetry() {
    checksumRetries.incrementAndGet();
  }

  /** Blocks fetched once more because their bytes did not match the checksum. */
  public long checksumRetries() {
    return checksumRetries.get();
  }

  void onBytesFetched(long bytes) {
    bytesFetched.addAndGet(bytes);
  }
  public long requestsServed() { return server.requestsServed(); }
  public long bytesServed() { return server.bytesServed(); }
  public long serveFailures() { return server.requestsFailed(); }
  public long malformedMessages() { return malformedMessages.get(); }
  public int pendingRequests() { return pending.size(); }

  /** Registered memory in use: map-output segments plus the landing region. */
  public long registeredBytes() {
    return store.memoryRegistered() + (landing.region().isOpen() ? landing.region().descriptor().length() : 0);
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    for (PendingRequest p : pending.values()) {
      fail(p, new TransportException(TransportError.CLOSED, "shuffle node is closing"));
    }
    deviceWrites.close();
    timer.shutdownNow();
    server.close();
    store.close();
    synchronized (shuffleLanding) {
      shuffleLanding.values().forEach(RegisteredRegion::close);
      shuffleLanding.clear();
    }
    landing.region().close();
    landingAccount.release(config.landingBytes());
    transport.close();
    rootPool.close(); // fails loudly if any registered memory is still accounted

  }
}
