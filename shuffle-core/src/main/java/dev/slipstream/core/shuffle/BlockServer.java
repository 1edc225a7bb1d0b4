package dev.slipstream.core.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.Entry;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteFailure;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.PeerText;
import dev.slipstream.core.transport.RateLimitedLog;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The holder side: serves write requests by writing the requested block ranges one-sided into
 * the reader's landing region, then signalling the byte count on the same queue.
 *
 * <p>Who may ask: a request must name this node's application, and an executor whose endpoint in
 * the {@link PeerDirectory} is the endpoint the request's connection came from; everything is
 * then written to the directory's endpoint, never to one a connection merely claims. A request
 * failing this is dropped unanswered (the sender may be a stranger), counted and logged at a
 * bounded rate.
 *
 * <p>Every request is then checked before anything is written: each block must be committed here
 * and each range must lie inside its block and inside the landing region, and the request must
 * still be within its time budget. A request that fails a check is answered with a
 * {@link WriteFailure} and nothing is written. Writes that do not complete within the write
 * timeout close the connection to the reader, which fails them and releases the map outputs they
 * held, so a reader that stops reading cannot pin outputs.
 *
 * <p>Threading: requests arrive on a transport thread; those reading only in-memory output are
 * served there, the others on this server's own threads (reading spilled output may block, and
 * so may reading outputs of a {@link ServedOutput.Source}, such as GPU map outputs copied to the
 * host). Ownership: the server retains map outputs until
 * the writes that read them complete.
 */
final class BlockServer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(BlockServer.class);

  private final Transport transport;
  private final MapOutputStore store;
  private final NodeIdentity identity;
  private final PeerDirectory peers;
  private final ScheduledExecutorService timer;
  private final long writeTimeoutNanos;
  private final ExecutorService threads;
  /** Outputs kept outside the store (GPU map outputs), asked when the store has none; null: none. */
  private volatile ServedOutput.Source also;
  private final AtomicLong requestsServed = new AtomicLong();
  private final AtomicLong requestsFailed = new AtomicLong();
  private final AtomicLong bytesServed = new AtomicLong();
  private final AtomicLong requestsRefused = new AtomicLong();
  private final AtomicLong writesTimedOut = new AtomicLong();
  private final AtomicLong writesRetried = new AtomicLong();
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
    this.store = store;
    this.identity = identity;
    this.peers = peers;
    this.timer = timer;
    this.writeTimeoutNanos = writeTimeout.toNanos();
    AtomicInteger n = new AtomicInteger();
    this.threads = Executors.newFixedThreadPool(nThreads, r -> {
      Thread t = new Thread(r, "slipstream-serve-" + name + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
  }

  /** Serves outputs {@code source} has and the store has not from now on. */
  void serveAlso(ServedOutput.Source source) {
    this.also = source;
  }

  /**
   * Serves a request: on the calling transport thread when every output it reads is in memory
   * (posting writes from registered pages never blocks, and a hand-off would cost the reader a
   * thread wake-up per request), else on a server thread, which may read files.
   */
  void submit(PeerIdentity sender, WriteRequest request) {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.min(request.budgetMillis(),
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
    if (from.equals(known) && allInMemory(request)) {
      serve(known, request, deadline);
      return;
    }
    try {
      threads.execute(() -> {
        // A peer that joined or moved a moment ago may not have reached this copy of the table yet.
        EndpointDescriptor to = from.equals(known) ? known : peers.refresh(reader.executorId());
        if (to == null) {
          refuse(from, request, "executor " + PeerText.escape(reader.executorId()) + " is not in the peer table");
        } else if (!to.equals(from)) {
          refuse(from, request, "the peer table has " + to + " for executor " + PeerText.escape(reader.executorId())
              + ", not the connection's endpoint");
        } else {
          serve(to, request, deadline);
        }
      });
    } catch (RejectedExecutionException e) {
      if (known != null) {
        fail(known, request.requestId(), TransportError.CLOSED, "holder is shutting down");
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

  /**
   * Whether every output the request reads is in memory now. A hint: an output can still move
   * to disk before it is retained, and is then read through a file mapping.
   */
  private boolean allInMemory(WriteRequest req) {
    long lastMap = Long.MIN_VALUE;
    for (Entry e : req.entries()) {
      if (e.mapId() == lastMap) {
        continue;
      }
      lastMap = e.mapId();
      if (!store.isInMemory(req.shuffleId(), e.mapId())) {
        return false;
      }
    }
    return true;
  }

  private void serve(EndpointDescriptor from, WriteRequest req, long deadline) {
    List<ServedOutput> retained = new ArrayList<>();
    try {
      long late = System.nanoTime() - deadline;
      if (late > 0) {
        throw new TransportException(TransportError.TIMEOUT, "request " + req.requestId() + " waited here "
            + TimeUnit.NANOSECONDS.toMillis(late) + " ms past its time budget of " + req.budgetMillis()
            + " ms; the reader has given up on it, nothing written");
      }
      RegionDescriptor landing = req.landing();
      int records = req.tableRecords();
      checkSlot(landing, req.lengthsOffset(), (long) ShuffleMessages.TABLE_ENTRY * records, "block table");
      checkSlot(landing, req.signalOffset(), 8, "signal");
      ByteBuffer lengths = ByteBuffer.allocateDirect(ShuffleMessages.TABLE_ENTRY * records).order(ByteOrder.LITTLE_ENDIAN);
      List<ByteBuffer> slices = new ArrayList<>();
      List<Long> dsts = new ArrayList<>();
      long total = 0;
      for (Entry e : req.entries()) {
        if (e.landingOffset() > landing.length() || e.capacity() > landing.length() - e.landingOffset()) {
          throw new TransportException(TransportError.OUT_OF_RANGE, "landing offset " + e.landingOffset()
              + " + capacity " + e.capacity() + " outside " + landing);
        }
        ServedOutput out = store.retain(req.shuffleId(), e.mapId());
        ServedOutput.Source other = also;
        if (out == null && other != null) {
          out = other.retain(req.shuffleId(), e.mapId());
        }
        if (out == null) {
          throw new TransportException(TransportError.UNKNOWN_REGION, "no map output for shuffle "
              + req.shuffleId() + " map " + e.mapId() + " on this executor (lost, removed or never written here)");
        }
        retained.add(out);
        if (e.endPartition() > out.numPartitions()) {
          throw new TransportException(TransportError.OUT_OF_RANGE, (e.partitions() == 1 ? "partition " + e.partition()
              : "partitions [" + e.partition() + ", " + e.endPartition() + ")") + " outside [0, "
              + out.numPartitions() + ") of map output " + req.shuffleId() + "/" + e.mapId());
        }
        BlockId block = new BlockId(req.shuffleId(), e.mapId(), e.partition(), e.endPartition());
        long blockLength = out.runLength(e.partition(), e.endPartition());
        if (e.blockOffset() > blockLength) {
          throw new TransportException(TransportError.OUT_OF_RANGE, "block offset " + e.blockOffset()
              + " outside block " + block + " (length " + blockLength + ")");
        }
        long available = blockLength - e.blockOffset();
        long len = Math.min(available, e.capacity());
        long dst = e.landingOffset();
        for (ByteBuffer s : out.runSlices(e.partition(), e.endPartition(), e.blockOffset(), len)) {
          slices.add(s);
          dsts.add(dst);
          dst += s.remaining();
        }
        // One record per partition: its bytes from the block offset on, and its own checksum.
        long start = 0;
        for (int p = e.partition(); p < e.endPartition(); p++) {
          long end = start + out.partitionLength(p);
          lengths.putLong(Math.max(0, end - Math.max(start, e.blockOffset()))).putLong(out.checksum(p));
          start = end;
        }
        total += len;
      }
      lengths.flip();
      Writes w = new Writes(slices, dsts, lengths, total, List.copyOf(retained));
      retained.clear();
      post(from, req, w, deadline, true);
    } catch (TransportException e) {
      fail(from, req.requestId(), e.error(), e.getMessage());
    } catch (IOException | RuntimeException e) {
      fail(from, req.requestId(), TransportError.INTERNAL, e.toString());
    } finally {
      retained.forEach(ServedOutput::release);
    }
  }

  /** A request's checked writes: the slices and where each goes, the block table, the outputs they pin. */
  private record Writes(List<ByteBuffer> slices, List<Long> dsts, ByteBuffer table, long bytes,
                        List<ServedOutput> held) {}

  /**
   * Posts a request's writes on the queue to the reader and releases the outputs once they
   * completed. When the connection they went on died under them (the reader closed it as idle at
   * that moment, or it broke) they are posted once more on a fresh connection, within the
   * request's budget: writing the same bytes twice is harmless, and once the request ended at the
   * reader its registration rejects the second copy.
   */
  private void post(EndpointDescriptor to, WriteRequest req, Writes w, long deadline, boolean mayRetry) {
    RegionDescriptor landing = req.landing();
    PeerQueue q;
    try {
      q = transport.connect(to);
    } catch (TransportException e) {
      w.held().forEach(ServedOutput::release);
      fail(to, req.requestId(), e.error(), "cannot reach the reader: " + e.getMessage());
      return;
    }
    List<CompletableFuture<Void>> futures = new ArrayList<>(w.slices().size() + 1);
    for (int i = 0; i < w.slices().size(); i++) {
      futures.add(q.write(w.slices().get(i), landing.at(w.dsts().get(i))));
    }
    futures.add(q.writeAndSignal(w.table().duplicate(), landing.at(req.lengthsOffset()),
        landing.at(req.signalOffset()), req.entries().size()));
    q.commit();
    CompletableFuture<Void> all = CompletableFuture.allOf(futures.toArray(new CompletableFuture<?>[0]));
    ScheduledFuture<?> watchdog = watch(all, q, req.requestId());
    all.whenComplete((v, err) -> {
      if (watchdog != null) {
        watchdog.cancel(false);
      }
      if (err == null) {
        w.held().forEach(ServedOutput::release);
        requestsServed.incrementAndGet();
        bytesServed.addAndGet(w.bytes());
        return;
      }
      Throwable cause = err.getCause() != null ? err.getCause() : err;
      TransportError code = cause instanceof TransportException te ? te.error() : TransportError.INTERNAL;
      boolean connectionDied = code == TransportError.PEER_LOST || code == TransportError.TIMEOUT;
      if (mayRetry && connectionDied && System.nanoTime() < deadline) {
        writesRetried.incrementAndGet();
        post(to, req, w, deadline, false);
        return;
      }
      w.held().forEach(ServedOutput::release);
      fail(to, req.requestId(), code, "writing into the reader's landing region failed: " + cause.getMessage());
    });
  }

  /**
   * Closes the queue to the reader if {@code writes} have not completed within the write timeout:
   * that fails them, and their completion releases the map outputs. Null when the node is closing
   * (closing the transport fails them then).
   */
  private ScheduledFuture<?> watch(CompletableFuture<Void> writes, PeerQueue q, long requestId) {
    try {
      return timer.schedule(() -> {
        if (!writes.isDone()) {
          writesTimedOut.incrementAndGet();
          LOG.warn("Writes of request {} to {} did not complete within {} ms; closing the connection to release"
              + " the map outputs they hold", requestId, q.peer(), TimeUnit.NANOSECONDS.toMillis(writeTimeoutNanos));
          q.close();
        }
      }, writeTimeoutNanos, TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException e) {
      return null;
    }
  }

  private static void checkSlot(RegionDescriptor landing, long offset, long length, String what)
      throws TransportException {
    if (offset < 0 || (offset & 7) != 0 || offset > landing.length() || length > landing.length() - offset) {
      throw new TransportException(TransportError.OUT_OF_RANGE, what + " at offset " + offset + " (length "
          + length + ") is not an aligned slot inside " + landing);
    }
  }

  private void fail(EndpointDescriptor from, long requestId, TransportError error, String reason) {
    requestsFailed.incrementAndGet();
    LOG.warn("Write request {} from {} failed: {}", requestId, from, reason);
    try {
      PeerQueue q = transport.connect(from);
      q.send(new WriteFailure(requestId, error, reason).encode());
      q.commit();
    } catch (TransportException e) {
      LOG.warn("Could not tell {} that request {} failed: {}", from, requestId, e.getMessage());
    }
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

  /** Requests whose writes missed the write timeout (their connection was closed). */
  long writesTimedOut() {
    return writesTimedOut.get();
  }

  /** Requests whose writes were posted again because their connection died under them. */
  long writesRetried() {
    return writesRetried.get();
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
