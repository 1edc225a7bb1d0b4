package dev.slipstream.core.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.Entry;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteFailure;
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
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The holder side: serves write requests by writing the requested block ranges one-sided into
 * the reader's landing region, then signalling the byte count on the same queue.
 *
 * <p>Every request is checked before anything is written: each block must be committed here
 * and each range must lie inside its block and inside the landing region. A request that fails
 * a check is answered with a {@link WriteFailure} and nothing is written.
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
  private final ExecutorService threads;
  /** Outputs kept outside the store (GPU map outputs), asked when the store has none; null: none. */
  private volatile ServedOutput.Source also;
  private final AtomicLong requestsServed = new AtomicLong();
  private final AtomicLong requestsFailed = new AtomicLong();
  private final AtomicLong bytesServed = new AtomicLong();

  BlockServer(Transport transport, MapOutputStore store, int nThreads, String name) {
    this.transport = transport;
    this.store = store;
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
  void submit(EndpointDescriptor from, WriteRequest request) {
    if (allInMemory(request)) {
      serve(from, request);
      return;
    }
    try {
      threads.execute(() -> serve(from, request));
    } catch (RejectedExecutionException e) {
      fail(from, request.requestId(), TransportError.CLOSED, "holder is shutting down");
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

  private void serve(EndpointDescriptor from, WriteRequest req) {
    List<ServedOutput> retained = new ArrayList<>();
    try {
      RegionDescriptor landing = req.landing();
      int n = req.entries().size();
      checkSlot(landing, req.lengthsOffset(), (long) ShuffleMessages.TABLE_ENTRY * n, "block table");
      checkSlot(landing, req.signalOffset(), 8, "signal");
      ByteBuffer lengths = ByteBuffer.allocateDirect(ShuffleMessages.TABLE_ENTRY * n).order(ByteOrder.LITTLE_ENDIAN);
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
        if (e.partition() >= out.numPartitions()) {
          throw new TransportException(TransportError.OUT_OF_RANGE, "partition " + e.partition()
              + " outside [0, " + out.numPartitions() + ") of map output " + req.shuffleId() + "/" + e.mapId());
        }
        long blockLength = out.partitionLength(e.partition());
        if (e.blockOffset() > blockLength) {
          throw new TransportException(TransportError.OUT_OF_RANGE, "block offset " + e.blockOffset()
              + " outside block " + new BlockId(req.shuffleId(), e.mapId(), e.partition()) + " (length " + blockLength + ")");
        }
        long available = blockLength - e.blockOffset();
        long len = Math.min(available, e.capacity());
        long dst = e.landingOffset();
        for (ByteBuffer s : out.slices(e.partition(), e.blockOffset(), len)) {
          slices.add(s);
          dsts.add(dst);
          dst += s.remaining();
        }
        lengths.putLong(available).putLong(out.checksum(e.partition()));
        total += len;
      }
      lengths.flip();
      PeerQueue q = transport.connect(from);
      List<CompletableFuture<Void>> futures = new ArrayList<>(slices.size() + 1);
      for (int i = 0; i < slices.size(); i++) {
        futures.add(q.write(slices.get(i), landing.at(dsts.get(i))));
      }
      futures.add(q.writeAndSignal(lengths, landing.at(req.lengthsOffset()), landing.at(req.signalOffset()), n));
      q.commit();
      long bytes = total;
      List<ServedOutput> held = List.copyOf(retained);
      retained.clear();
      CompletableFuture.allOf(futures.toArray(new CompletableFuture<?>[0])).whenComplete((v, err) -> {
        held.forEach(ServedOutput::release);
        if (err == null) {
          requestsServed.incrementAndGet();
          bytesServed.addAndGet(bytes);
        } else {
          Throwable cause = err.getCause() != null ? err.getCause() : err;
          fail(from, req.requestId(), cause instanceof TransportException te ? te.error() : TransportError.INTERNAL,
              "writing into the reader's landing region failed: " + cause.getMessage());
        }
      });
    } catch (TransportException e) {
      fail(from, req.requestId(), e.error(), e.getMessage());
    } catch (IOException | RuntimeException e) {
      fail(from, req.requestId(), TransportError.INTERNAL, e.toString());
    } finally {
      retained.forEach(ServedOutput::release);
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
