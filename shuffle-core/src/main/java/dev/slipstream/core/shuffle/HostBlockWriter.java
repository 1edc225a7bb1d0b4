package dev.slipstream.core.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.Entry;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The block writer into host landing regions: one-sided writes over the shuffle transport, from
 * the map-output store's registered pages (or the views a {@link ServedOutput.Source} gives, such
 * as GPU map outputs copied to the host), then the {@link BlockTable} and one addition of the whole
 * request's pieces and bytes to its {@link LandingSignal} on the same queue, so the signal lands
 * after every byte.
 *
 * <p>Each block must be committed here and each range must lie inside its block; a request that
 * fails a check writes nothing. Writes that do not complete within the write timeout close the
 * connection to the reader, which fails them and releases the map outputs they held, so a reader
 * that stops reading cannot pin outputs.
 *
 * <p>Threading: requests reading only in-memory outputs are written on the calling (transport)
 * thread: posting writes from registered pages never blocks, and a hand-off would cost the reader
 * a thread wake-up per request. The others go to the server's threads (reading spilled output may
 * block, and so may reading a source's outputs). Ownership: retains map outputs until the writes
 * that read them complete; owns nothing it was given.
 */
final class HostBlockWriter implements BlockWriter {
  private static final Logger LOG = LoggerFactory.getLogger(HostBlockWriter.class);

  private final Transport transport;
  private final MapOutputStore store;
  private final ScheduledExecutorService timer;
  private final ExecutorService threads;
  private final long writeTimeoutNanos;
  /** Outputs kept outside the store (GPU map outputs), asked when the store has none; null: none. */
  private volatile ServedOutput.Source also;
  private final AtomicLong writesTimedOut = new AtomicLong();
  private final AtomicLong writesRetried = new AtomicLong();

  HostBlockWriter(Transport transport, MapOutputStore store, ScheduledExecutorService timer, ExecutorService threads,
                  long writeTimeoutNanos) {
    this.transport = transport;
    this.store = store;
    this.timer = timer;
    this.threads = threads;
    this.writeTimeoutNanos = writeTimeoutNanos;
  }

  void serveAlso(ServedOutput.Source source) {
    this.also = source;
  }

  @Override
  public void write(EndpointDescriptor reader, WriteRequest req, long receivedNanos, long deadlineNanos,
                    Outcome outcome) {
    if (allInMemory(req)) {
      serve(reader, req, deadlineNanos, outcome);
      return;
    }
    try {
      threads.execute(() -> serve(reader, req, deadlineNanos, outcome));
    } catch (RejectedExecutionException e) {
      outcome.done(0, new TransportException(TransportError.CLOSED, "holder is shutting down"), ServeTimeline.NONE);
    }
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

  private void serve(EndpointDescriptor to, WriteRequest req, long deadline, Outcome outcome) {
    List<ServedOutput> retained = new ArrayList<>();
    try {
      long late = System.nanoTime() - deadline;
      if (late > 0) {
        throw new TransportException(TransportError.TIMEOUT, "request " + req.requestId() + " waited here "
            + TimeUnit.NANOSECONDS.toMillis(late) + " ms past its time budget of " + req.budgetMillis()
            + " ms; the reader has given up on it, nothing written");
      }
      ByteBuffer table = ByteBuffer.allocateDirect(Math.toIntExact(req.tableBytes())).order(ByteOrder.LITTLE_ENDIAN);
      BlockTable.putHeader(table, req.requestId(), req.tableRecords());
      List<ByteBuffer> slices = new ArrayList<>();
      List<Long> dsts = new ArrayList<>();
      long total = 0;
      for (Entry e : req.entries()) {
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
        // One record per partition: its bytes from the block offset on, its own checksum, no row count.
        long start = 0;
        for (int p = e.partition(); p < e.endPartition(); p++) {
          long end = start + out.partitionLength(p);
          table.putLong(Math.max(0, end - Math.max(start, e.blockOffset()))).putInt((int) out.checksum(p)).putInt(0);
          start = end;
        }
        total += len;
      }
      table.flip();
      Writes w = new Writes(slices, dsts, table, total, List.copyOf(retained));
      retained.clear();
      post(to, req, w, deadline, true, outcome);
    } catch (TransportException e) {
      outcome.done(0, e, ServeTimeline.NONE);
    } catch (IOException | RuntimeException e) {
      outcome.done(0, new TransportException(TransportError.INTERNAL, e.toString(), e), ServeTimeline.NONE);
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
  private void post(EndpointDescriptor to, WriteRequest req, Writes w, long deadline, boolean mayRetry,
                    Outcome outcome) {
    RegionDescriptor landing = req.landing();
    PeerQueue q;
    try {
      q = transport.connect(to);
    } catch (TransportException e) {
      w.held().forEach(ServedOutput::release);
      outcome.done(0, new TransportException(e.error(), "cannot reach the reader: " + e.getMessage(), e),
          ServeTimeline.NONE);
      return;
    }
    List<CompletableFuture<Void>> futures = new ArrayList<>(w.slices().size() + 1);
    for (int i = 0; i < w.slices().size(); i++) {
      futures.add(q.write(w.slices().get(i), landing.at(w.dsts().get(i))));
    }
    // One addition for the whole request: the queue orders it after every write above.
    futures.add(q.writeAndSignal(w.table().duplicate(), landing.at(req.tableOffset()),
        landing.at(req.signalOffset()), LandingSignal.of(req.expectedPieces(), w.bytes() + req.tableBytes())));
    q.commit();
    CompletableFuture<Void> all = CompletableFuture.allOf(futures.toArray(new CompletableFuture<?>[0]));
    ScheduledFuture<?> watchdog = watch(all, q, req.requestId());
    all.whenComplete((v, err) -> {
      if (watchdog != null) {
        watchdog.cancel(false);
      }
      if (err == null) {
        w.held().forEach(ServedOutput::release);
        outcome.done(w.bytes(), null, ServeTimeline.NONE);
        return;
      }
      Throwable cause = err.getCause() != null ? err.getCause() : err;
      TransportError code = cause instanceof TransportException te ? te.error() : TransportError.INTERNAL;
      boolean connectionDied = code == TransportError.PEER_LOST || code == TransportError.TIMEOUT;
      if (mayRetry && connectionDied && System.nanoTime() < deadline) {
        writesRetried.incrementAndGet();
        post(to, req, w, deadline, false, outcome);
        return;
      }
      w.held().forEach(ServedOutput::release);
      outcome.done(0, new TransportException(code, "writing into the reader's landing region failed: "
          + cause.getMessage(), cause), ServeTimeline.NONE);
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

  /** Requests whose writes missed the write timeout (their connection was closed). */
  long writesTimedOut() {
    return writesTimedOut.get();
  }

  /** Requests whose writes were posted again because their connection died under them. */
  long writesRetried() {
    return writesRetried.get();
  }
}
