package dev.slipstream.core.shuffle;

import dev.slipstream.core.config.CoreConfig;
import dev.slipstream.core.memory.MemoryPool;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerQueue;
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
 * <p>Protocol (pull-driven writes): the reader reserves a landing range, registers that range
 * alone under a fresh region id and key, and sends the holder a {@link WriteRequest} naming that
 * registration; the holder writes the block ranges one-sided into it, then the block table, and adds
 * the request's pieces and bytes to its signal slot ({@link LandingSignal}); the reader consumes after the signal. A holder that cannot serve
 * answers with a {@link WriteResult} naming the error. However a request ends (signalled, refused, holder lost,
 * deadline, cancelled by its fetcher, shuffle removed), its registration is revoked before the
 * request completes, so no write for it lands afterwards and a reused range is reachable only by
 * its new request. The holder's {@link BlockServer} serves every request alike and hands it to
 * the {@link BlockWriter} of its landing region's memory (host memory here; a GPU registers its
 * own, {@link #setWriter}); a GPU reader's requests, answered when served too, are sent through
 * {@link #writeExchange()}.
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
  private final NodeIdentity identity;
  private final BlockServer server;
  private final ScheduledExecutorService timer;
  private final ConcurrentHashMap<Long, PendingRequest> pending = new ConcurrentHashMap<>();
  private final AtomicLong nextRequestId = new AtomicLong(1);
  private final AtomicLong requestsSent = new AtomicLong();
  private final AtomicLong requestsFailed = new AtomicLong();
  private final AtomicLong bytesFetched = new AtomicLong();
  private final AtomicLong malformedMessages = new AtomicLong();
  private final AtomicLong checksumRetries = new AtomicLong();
  private final WriteExchange writeExchange;
  private volatile boolean closed;

  /**
   * @param identity this node's application and executor id, carried by every request it sends
   * @param peers the peer table the block server writes by: only to the endpoint it holds for a
   *     request's executor
   */
  public ShuffleNode(Transport transport, CoreConfig config, Path spillDir, NodeIdentity identity, PeerDirectory peers) {
    this(transport, config, spillDir, identity, peers, dev.slipstream.core.memory.DirectMemory.JDK);
  }

  /** @param memory where the landing pool and the map-output segments come from */
  public ShuffleNode(Transport transport, CoreConfig config, Path spillDir, NodeIdentity identity, PeerDirectory peers,
                     dev.slipstream.core.memory.DirectMemory memory) {
    String name = identity.executorId();
    this.transport = transport;
    this.config = config;
    this.identity = identity;
    // No limit of its own: each child has one (map output, landing, and a GPU's pools when it has one).
    this.rootPool = MemoryPool.root("slipstream-" + name, Long.MAX_VALUE);
    this.store = new MapOutputStore(transport, rootPool.child("map-output", config.mapOutputMemory()),
        config.segmentBytes(), config.pageBytes(), spillDir, config.checksum(), memory);
    this.landingAccount = rootPool.child("landing", config.landingBytes());
    if (!landingAccount.tryReserve(config.landingBytes())) {
      throw new IllegalStateException("landing pool does not fit its own budget");
    }
    this.landing = new LandingPool(memory.allocate((int) config.landingBytes()));
    java.util.concurrent.ScheduledThreadPoolExecutor t0 = new java.util.concurrent.ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, "slipstream-timer-" + name);
      t.setDaemon(true);
      return t;
    });
    t0.setRemoveOnCancelPolicy(true); // a completed request's deadline leaves the queue at once
    this.timer = t0;
    this.server = new BlockServer(transport, store, identity, peers, timer, config.fetchTimeout(),
        config.serverThreads());
    this.writeExchange = new WriteExchange(transport, timer, config.fetchTimeout(), name, server::submit);
    transport.setMessageHandler(dev.slipstream.core.transport.MessageHandler.identified(this::onMessage));
  }

  public Transport transport() { return transport; }
  public MapOutputStore store() { return store; }
  public LandingPool landing() { return landing; }
  public CoreConfig config() { return config; }
  /**
   * The root of this node's memory accounting tree: the map-output store's and the landing
   * memory's pools, and those other mechanisms add (a GPU's). {@link #close()} closes it, failing
   * loudly if anything is still reserved, so a mechanism closes its own pools first.
   */
  public MemoryPool memory() { return rootPool; }
  public EndpointDescriptor localEndpoint() { return transport.localEndpoint(); }
  /** This node's application and executor, as its requests name them. */
  public NodeIdentity identity() { return identity; }
  /**
   * Write requests whose sender waits for the holder's answer (GPU readers), sent from this node,
   * and the request ring this node may serve.
   */
  public WriteExchange writeExchange() { return writeExchange; }

  /** A fresh id for a write request of this node's (host and device requests draw from one sequence). */
  public long nextRequestId() { return nextRequestId.getAndIncrement(); }

  /**
   * Serves write requests into landing regions of memory {@code kind} (not host memory, which the
   * node writes itself) with {@code writer} from now on.
   */
  public void setWriter(dev.slipstream.core.transport.MemoryKind kind, BlockWriter writer) {
    server.setWriter(kind, writer);
  }

  /**
   * Serves write requests for map outputs that {@code source} has and the map-output store has
   * not (GPU map outputs read by reducers without a direct device path), on the server's threads.
   */
  public void serveAlso(ServedOutput.Source source) {
    server.serveAlso(source);
  }

  private void onMessage(dev.slipstream.core.transport.PeerIdentity sender, ByteBuffer message) {
    EndpointDescriptor from = sender.endpoint();
    ShuffleMessages.Message m;
    try {
      m = ShuffleMessages.decode(message);
    } catch (TransportException e) {
      malformedMessages.incrementAndGet();
      LOG.warn("Dropped a malformed shuffle message from {}: {}", from, e.getMessage());
      return;
    }
    if (m instanceof WriteRequest req) {
      server.submit(sender, req);
    } else if (m instanceof WriteResult r) {
      PendingRequest p = pending.get(r.requestId());
      if (p != null && p.holder.equals(from)) {
        if (!r.served()) { // a served host request ends with its signal
          fail(p, new TransportException(r.error(), "holder " + from + " could not serve request "
              + r.requestId() + ": " + r.reason()));
        }
      } else if (!writeExchange.onResult(from, r)) {
        LOG.debug("Dropped an answer to write request {} from {}: not waiting for it from there", r.requestId(), from);
      }
    }
  }

  /**
   * A signal applied to request {@code p}'s own registration. Only the request's signal slot may
   * be signalled, by at most the request's piece count ({@link LandingSignal}); anything else fails
   * the request. The count complete, the request completes with the signal's value (its bytes are
   * checked against the block table by the fetcher).
   */
  private void onSignal(PendingRequest p, long offset, long value) {
    long pieces = LandingSignal.pieces(value);
    if (offset != p.signalOffset) {
      fail(p, new TransportException(TransportError.OUT_OF_RANGE, "holder " + p.holder + " signalled offset " + offset
          + " of request " + p.requestId + "'s landing range, expected its signal slot at " + p.signalOffset));
    } else if (pieces > p.expected) {
      fail(p, new TransportException(TransportError.MALFORMED, "holder " + p.holder + " signalled " + pieces
          + " pieces for request " + p.requestId + ", expected " + p.expected));
    } else if (pieces == p.expected && remove(p)) {
      p.signalled = value;
      p.done.complete(null);
    }
  }

  /** Takes {@code p} out of the registry and revokes its landing registration; true for the one caller that took it. */
  private boolean remove(PendingRequest p) {
    boolean removed = pending.remove(p.requestId, p);
    if (removed) {
      p.revoke();
    }
    return removed;
  }

  private void fail(PendingRequest p, Throwable cause) {
    if (remove(p)) {
      requestsFailed.incrementAndGet();
      p.done.completeExceptionally(cause);
    }
  }

  /**
   * Sends a write request for {@code entries} to {@code holder} into {@code range}, which this
   * request registers alone (entry, table and signal offsets are relative to the range); the
   * signal slot is reset here before sending. The returned request is already revoked when it
   * completes; the caller frees the range after that (or after {@link #cancel}).
   */
  PendingRequest send(EndpointDescriptor holder, int shuffleId, LandingPool.Range range,
                      List<ShuffleMessages.Entry> entries, long tableOffset, long signalOffset) {
    long id = nextRequestId.getAndIncrement();
    if (closed) {
      PendingRequest p = new PendingRequest(id, shuffleId, holder, null, signalOffset, 0);
      p.done.completeExceptionally(new TransportException(TransportError.CLOSED, "shuffle node is closed"));
      return p;
    }
    RegisteredRegion region;
    try {
      region = transport.register(range.memory());
    } catch (TransportException e) {
      PendingRequest p = new PendingRequest(id, shuffleId, holder, null, signalOffset, 0);
      p.done.completeExceptionally(e);
      return p;
    }
    PendingRequest p = new PendingRequest(id, shuffleId, holder, region, signalOffset,
        WriteRequest.expectedPieces(entries));
    region.resetSignal(signalOffset, 0);
    region.setSignalListener((r, offset, value) -> onSignal(p, offset, value));
    long timeout = config.fetchTimeout().toNanos();
    long deadline = System.nanoTime() + timeout;
    pending.put(id, p);
    if (closed) { // close() may have swept the registry before the put
      fail(p, new TransportException(TransportError.CLOSED, "shuffle node is closed"));
      return p;
    }
    java.util.concurrent.ScheduledFuture<?> deadlineTask;
    try {
      deadlineTask = timer.schedule(() -> fail(p, new TransportException(TransportError.TIMEOUT, "holder " + holder
          + " did not complete request " + id + " (" + entries.size() + " blocks) within "
          + config.fetchTimeout().toMillis() + " ms")), timeout, TimeUnit.NANOSECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      fail(p, new TransportException(TransportError.CLOSED, "shuffle node is closed"));
      return p;
    }
    p.done.whenComplete((v, e) -> deadlineTask.cancel(false));
    requestsSent.incrementAndGet();
    sendRequest(p, shuffleId, entries, tableOffset, deadline, true);
    return p;
  }

  /**
   * Sends {@code p}'s request message, with the time left until {@code deadline} as its budget.
   * When the connection it went on died under it (the holder closed it as idle at that moment, or
   * it broke), it is sent once more on a fresh connection: a holder that got both serves the same
   * bytes twice, and the second copy is rejected once the first ended the request.
   */
  private void sendRequest(PendingRequest p, int shuffleId, List<ShuffleMessages.Entry> entries, long tableOffset,
                           long deadline, boolean mayRetry) {
    long budget = Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
    WriteRequest req = new WriteRequest(p.requestId, shuffleId, identity, budget, p.region.descriptor(), tableOffset,
        p.signalOffset, entries);
    try {
      PeerQueue q = transport.connect(p.holder);
      q.send(req.encode()).whenComplete((v, err) -> {
        if (err == null) {
          return;
        }
        Throwable cause = err.getCause() != null ? err.getCause() : err;
        TransportError code = cause instanceof TransportException te ? te.error() : TransportError.INTERNAL;
        if (mayRetry && !p.done.isDone() && (code == TransportError.PEER_LOST || code == TransportError.TIMEOUT)) {
          sendRequest(p, shuffleId, entries, tableOffset, deadline, false);
        } else {
          fail(p, cause);
        }
      });
      q.commit();
    } catch (TransportException e) {
      fail(p, e);
    }
  }

  /**
   * Ends {@code p} if it is still open (its fetcher gave up on it: task closed or killed) and
   * returns once its landing registration is revoked, so its range may be freed at once.
   */
  void cancel(PendingRequest p, String why) {
    fail(p, new TransportException(TransportError.CLOSED, "request " + p.requestId + " was cancelled: " + why));
    p.revoke(); // waits for a revocation another thread began
  }

  /** Frees a shuffle's map output and ends (revokes) every request of it still waiting here. */
  public void removeShuffle(int shuffleId) {
    store.removeShuffle(shuffleId);
    for (PendingRequest p : pending.values()) {
      if (p.shuffleId == shuffleId) {
        fail(p, new TransportException(TransportError.CLOSED, "shuffle " + shuffleId + " was removed"));
      }
    }
  }

  /** Fails every request waiting on {@code holder} (it left the cluster). */
  public void peerLost(EndpointDescriptor holder, String why) {
    writeExchange.peerLost(holder, why);
    for (PendingRequest p : pending.values()) {
      if (p.holder.equals(holder)) {
        fail(p, new TransportException(TransportError.PEER_LOST, "holder " + holder + " was lost: " + why));
      }
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
  /** Write requests that reached this node's block server: each is served, fails or is refused, once. */
  public long requestsReceived() { return server.requestsReceived(); }
  public long requestsServed() { return server.requestsServed(); }
  public long bytesServed() { return server.bytesServed(); }
  public long serveFailures() { return server.requestsFailed(); }
  /** Write requests dropped unanswered: another application's, or from a connection the peer table does not place. */
  public long requestsRefused() { return server.requestsRefused(); }
  /** Served requests whose writes missed the write timeout (their connection was closed). */
  public long writesTimedOut() { return server.writesTimedOut(); }
  /** Served requests whose writes were posted once more because their connection died under them. */
  public long writesRetried() { return server.writesRetried(); }
  /** Second reports of a request by its block writer, ignored (0 unless a writer is broken). */
  public long writerReportsIgnored() { return server.reportsIgnored(); }
  public long malformedMessages() { return malformedMessages.get(); }
  public int pendingRequests() { return pending.size(); }

  /** Registered memory in use: map-output segments plus the landing ranges of open requests. */
  public long registeredBytes() {
    return store.memoryRegistered() + landing.used();
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
    writeExchange.close();
    timer.shutdownNow();
    server.close();
    store.close();
    landingAccount.release(config.landingBytes());
    transport.close();
    rootPool.close(); // fails loudly if any registered memory is still accounted

  }
}
