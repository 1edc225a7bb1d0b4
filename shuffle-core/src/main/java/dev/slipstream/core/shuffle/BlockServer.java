package dev.slipstream.core.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.PeerText;
import dev.slipstream.core.transport.RateLimitedLog;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The holder side: admits write requests, checks them once, and hands each to the
 * {@link BlockWriter} of its landing region's memory kind ({@link HostBlockWriter} for host
 * memory; another mechanism registers its own, such as the GPU's push into device memory); then
 * answers: a {@link WriteResult} for every request that failed, and for a served one that asks
 * ({@link WriteRequest#ANSWER_SERVED}).
 *
 * <p>Who may ask: a request must name this node's application, and an executor whose endpoint in
 * the {@link PeerDirectory} is the endpoint the request's connection came from; everything is
 * then written to the directory's endpoint, never to one a connection merely claims. A request
 * failing this is dropped unanswered (the sender may be a stranger), counted and logged at a
 * bounded rate.
 *
 * <p>Every admitted request is then checked before anything is written: it must still be within
 * its time budget, and its ranges must pass {@link WriteRequest#check()}; the writer checks its
 * map outputs. A request that fails a check is answered with the error and nothing is written.
 *
 * <p>Threading: requests arrive on a transport thread and are admitted there when the peer table
 * places their connection; otherwise (a peer that joined a moment ago) on this server's threads,
 * which also serve requests a writer cannot serve without blocking.
 */
final class BlockServer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(BlockServer.class);

  private final Transport transport;
  private final NodeIdentity identity;
  private final PeerDirectory peers;
  private final ExecutorService threads;
  private final HostBlockWriter host;
  private final Map<MemoryKind, BlockWriter> writers = new ConcurrentHashMap<>();
  private final AtomicLong requestsServed = new AtomicLong();
  private final AtomicLong requestsFailed = new AtomicLong();
  private final AtomicLong bytesServed = new AtomicLong();
  private final AtomicLong requestsRefused = new AtomicLong();
  private final AtomicLong reportsIgnored = new AtomicLong();
  private final AtomicLong requestsReceived = new AtomicLong();
  /** Refusals are logged at most once per sender every 10 s. */
  private final RateLimitedLog refusals = new RateLimitedLog(LOG, TimeUnit.SECONDS.toNanos(10));

  /**
   * @param writeTimeout how long the one-sided writes of one request may take before the
   *     connection to the reader is closed
   */
  BlockServer(Transport transport, MapOutputStore store, NodeIdentity identity, PeerDirectory peers,
              ScheduledExecutorService timer, Duration writeTimeout, int nThreads) {
    String name = identity.executorId();
    this.transport = transport;
    this.identity = identity;
    this.peers = peers;
    AtomicInteger n = new AtomicInteger();
    this.threads = Executors.newFixedThreadPool(nThreads, r -> {
      Thread t = new Thread(r, "slipstream-serve-" + name + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
    this.host = new HostBlockWriter(transport, store, timer, threads, writeTimeout.toNanos());
    writers.put(MemoryKind.HOST, host);
  }

  /** Serves outputs {@code source} has and the store has not from now on, into host landing regions. */
  void serveAlso(ServedOutput.Source source) {
    host.serveAlso(source);
  }

  /**
   * Serves requests into landing regions of memory {@code kind} with {@code writer} from now on
   * (until then they are answered with UNAVAILABLE). Host memory has its writer from the start.
   */
  void setWriter(MemoryKind kind, BlockWriter writer) {
    if (kind == MemoryKind.HOST) {
      throw new IllegalArgumentException("host landing regions are written by the server's own host writer");
    }
    writers.put(kind, writer);
  }

  /** Admits a request that came over the transport from {@code sender}, and serves it. */
  void submit(PeerIdentity sender, WriteRequest request) {
    long received = System.nanoTime();
    requestsReceived.incrementAndGet();
    long deadline = received + TimeUnit.MILLISECONDS.toNanos(Math.min(request.budgetMillis(),
        TimeUnit.DAYS.toMillis(1)));
    EndpointDescriptor from = sender.endpoint();
    NodeIdentity reader = request.reader();
    if (!reader.applicationId().equals(identity.applicationId())) {
      refuse(from, request, "it names application " + PeerText.escape(reader.applicationId()) + ", expected "
          + identity.applicationId());
      return;
    }
    // The connection's own identity (from its HELLO; empty where the transport has none) must agree.
    if (!sender.applicationId().isEmpty() && !sender.applicationId().equals(identity.applicationId())
        || !sender.executorId().isEmpty() && !sender.executorId().equals(reader.executorId())) {
      refuse(from, request, "its connection is of executor " + PeerText.escape(sender.executorId()) + " of "
          + PeerText.escape(sender.applicationId()) + ", the request names executor "
          + PeerText.escape(reader.executorId()));
      return;
    }
    EndpointDescriptor known = peers.lookup(reader.executorId());
    if (from.equals(known)) {
      serve(known, request, received, deadline);
      return;
    }
    try {
      threads.execute(() -> {
        // A peer that joined or moved a moment ago may not have reached this copy of the table yet.
        EndpointDescriptor to = peers.refresh(reader.executorId());
        if (to == null) {
          refuse(from, request, "executor " + PeerText.escape(reader.executorId()) + " is not in the peer table");
        } else if (!to.equals(from)) {
          refuse(from, request, "the peer table has " + to + " for executor " + PeerText.escape(reader.executorId())
              + ", not the connection's endpoint");
        } else {
          serve(to, request, received, deadline);
        }
      });
    } catch (RejectedExecutionException e) {
      if (known != null) {
        answer(known, request, 0, new TransportException(TransportError.CLOSED, "holder is shutting down"),
            ServeTimeline.NONE);
      }
    }
  }

  /** Drops a request this server will not answer (it may come from a stranger); logs at a bounded rate. */
  private void refuse(EndpointDescriptor from, WriteRequest req, String why) {
    requestsRefused.incrementAndGet();
    String sender = PeerText.escape(from);
    refusals.warn(sender, "Refused write request " + req.requestId() + " from " + sender + ": " + why
        + "; nothing written or answered");
  }

  /** Checks an admitted request and hands it to its writer; answers a refusal at once. */
  private void serve(EndpointDescriptor to, WriteRequest req, long received, long deadline) {
    BlockWriter writer = writers.get(req.landing().kind());
    try {
      if (writer == null) {
        throw new TransportException(TransportError.UNAVAILABLE, "executor " + identity.executorId()
            + " writes into no " + req.landing().kind() + " landing regions (no block writer for that memory here)");
      }
      long late = System.nanoTime() - deadline;
      if (late > 0) {
        throw new TransportException(TransportError.TIMEOUT, "request " + req.requestId() + " waited here "
            + TimeUnit.NANOSECONDS.toMillis(late) + " ms past its time budget of " + req.budgetMillis()
            + " ms; the reader has given up on it, nothing written");
      }
      req.check();
    } catch (TransportException e) {
      answer(to, req, 0, e, ServeTimeline.NONE);
      return;
    }
    AtomicBoolean once = new AtomicBoolean();
    try {
      writer.write(to, req, received, deadline, (bytes, error, timeline) -> {
        if (once.compareAndSet(false, true)) {
          answer(to, req, bytes, error, timeline);
        } else {
          reportsIgnored.incrementAndGet();
          LOG.warn("Block writer {} reported write request {} twice; the second report ({}) is ignored",
              writer.getClass().getSimpleName(), req.requestId(), error == null ? "served" : error.getMessage());
        }
      });
    } catch (RuntimeException e) {
      if (once.compareAndSet(false, true)) {
        answer(to, req, 0, new TransportException(TransportError.INTERNAL, "serving write request "
            + req.requestId() + ": " + e, e), ServeTimeline.NONE);
      }
    }
  }

  /** Counts a request's outcome and answers it: always when it failed, when served if it asks. */
  private void answer(EndpointDescriptor to, WriteRequest req, long bytes, TransportException error,
                      ServeTimeline timeline) {
    WriteResult r;
    if (error == null) {
      requestsServed.incrementAndGet();
      bytesServed.addAndGet(bytes);
      if (!req.answerServed()) {
        return;
      }
      r = new WriteResult(req.requestId(), null, bytes, "", timeline);
    } else {
      requestsFailed.incrementAndGet();
      LOG.warn("Write request {} from {} failed: {}", req.requestId(), to, error.getMessage());
      r = new WriteResult(req.requestId(), error.error(), 0, String.valueOf(error.getMessage()), timeline);
    }
    try {
      PeerQueue q = transport.connect(to);
      q.send(r.answeredAt(System.nanoTime()).encode());
      q.commit();
    } catch (TransportException e) {
      LOG.warn("Could not answer request {} to {}: {}", req.requestId(), to, e.getMessage());
    }
  }

  /** Requests that reached this server: each ends served, failed (answered) or refused (dropped). */
  long requestsReceived() {
    return requestsReceived.get();
  }

  long requestsServed() {
    return requestsServed.get();
  }

  long requestsFailed() {
    return requestsFailed.get();
  }

  long bytesServed() {
    return bytesServed.get();
  }

  /** Requests dropped unanswered: another application, or an executor the peer table does not place there. */
  long requestsRefused() {
    return requestsRefused.get();
  }

  /** Reports of requests a writer had reported before (a writer bug: each request is reported once). */
  long reportsIgnored() {
    return reportsIgnored.get();
  }

  /** Requests whose host writes missed the write timeout (their connection was closed). */
  long writesTimedOut() {
    return host.writesTimedOut();
  }

  /** Requests whose host writes were posted again because their connection died under them. */
  long writesRetried() {
    return host.writesRetried();
  }

  @Override
  public void close() {
    threads.shutdownNow();
    try {
      threads.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
