package dev.slipstream.spark.gpu;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.gpu.serve.RingRequests;
import dev.slipstream.gpu.serve.ServeRing;
import dev.slipstream.gpu.serve.ServeRingFile;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The reader's side of resident serving: a reduce task's device write request to a holder of this
 * machine goes into the ring that holder made for this executor ({@link ResidentServing#ringPath})
 * once the holder serves it, as a {@link ServeRing.Request} that also asks for the host path's
 * signal word (so the landing checks as on the host-driven path). One thread of this executor reads
 * the answers in the rings (host memory: no device copy per poll) and completes each request's
 * {@link RingAnswer}; the kernel answers only after its pushed bytes, table and signal are visible,
 * so a task waits on that answer and then reads its signal and table once. A request the kernel
 * refuses because its output is not in device memory or not in the directory
 * ({@code SLIP_ERR_BAD_REGION}: spilled, or not entered) is sent again the host-driven way (nothing
 * was written for it; its answer then no longer comes from the ring); every other refusal is the
 * holder's answer. A served answer carries the kernel's instants as a timeline
 * ({@link RingRequests#timeline}).
 *
 * <p>Threading: thread-safe. Ownership: maps the rings (their files are the holders');
 * {@link #close()} stops the answer thread and fails what is still waiting.
 */
final class ResidentRequests implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ResidentRequests.class);
  /** How long a missing or unserved ring is not looked for again. */
  private static final long RETRY_NANOS = 200_000_000L;
  /** How long the answer thread reads the rings back to back after the last answer. */
  private static final long SPIN_NANOS = 5_000_000L;

  private final String executorId;
  private final String applicationId;
  private final String ringDir;
  private final Map<String, Ring> rings = new ConcurrentHashMap<>();
  private final ConcurrentLinkedQueue<Posted> posted = new ConcurrentLinkedQueue<>();
  private final Thread answers;
  private final java.util.concurrent.atomic.AtomicLong postedCount = new java.util.concurrent.atomic.AtomicLong();
  private final java.util.concurrent.atomic.AtomicLong fallbackCount = new java.util.concurrent.atomic.AtomicLong();
  private volatile boolean closed;

  /** A holder's ring as this reader sees it: mapped (null until the file exists), or looked for again after {@code retryAt}. */
  private record Ring(ServeRingFile file, long retryAt) {}

  private record Posted(String holder, ServeRing ring, long ticket, long requestId, long giveUpAt,
      RingAnswer answer, Supplier<CompletableFuture<WriteResult>> fallback) {}

  /**
   * The answer to a request posted into a resident ring. While {@link #fromRing()}, it completes
   * only once the kernel's pushed bytes, block table and signal are visible (the kernel answers
   * after a system-scope fence), so a task that waits on it needs no device copy per poll; once the
   * request was sent again the host-driven way, it completes with that holder's answer, which may
   * come after the data: then the signal is what says the blocks landed.
   */
  static final class RingAnswer extends CompletableFuture<WriteResult> {
    private volatile boolean fromRing = true;

    boolean fromRing() {
      return fromRing;
    }
  }

  ResidentRequests(String executorId, String applicationId, String ringDir) {
    this.executorId = executorId;
    this.applicationId = applicationId;
    this.ringDir = ringDir;
    this.answers = new Thread(this::readAnswers, "slipstream-serve-answers");
    this.answers.setDaemon(true);
    this.answers.start();
  }

  /**
   * Posts {@code req} into holder {@code holder}'s ring for this executor when the holder serves one
   * and the request fits it (at most {@value ServeRing#MAX_BLOCKS} blocks, into {@code ownLanding});
   * the returned answer completes as the holder's would. Empty: send it the host-driven way
   * ({@code fallback}, which a refusal for an output not in device memory also takes).
   */
  Optional<CompletableFuture<WriteResult>> trySend(String holder, WriteRequest req, RegionDescriptor ownLanding,
      Duration answerWithin, Supplier<CompletableFuture<WriteResult>> fallback) {
    if (closed || !RingRequests.fits(req) || !req.landing().equals(ownLanding)) {
      return Optional.empty();
    }
    ServeRing ring = ringOf(holder);
    if (ring == null || ring.broken()) {
      return Optional.empty();
    }
    long now = System.nanoTime();
    long ticket = ring.post(RingRequests.request(req, ownLanding.key(), now), 1_000_000_000L);
    if (ticket < 0) {
      LOG.warn("Slipstream executor {}: the resident ring of holder {} is broken (a request was never answered);"
          + " its requests go the host-driven way", executorId, holder);
      return Optional.empty();
    }
    postedCount.incrementAndGet();
    RingAnswer answer = new RingAnswer();
    posted.add(new Posted(holder, ring, ticket, req.requestId(), now + answerWithin.toNanos(), answer, fallback));
    LockSupport.unpark(answers);
    return Optional.of(answer);
  }

  /** Requests posted into resident rings since start. */
  long posted() {
    return postedCount.get();
  }

  /** Of those, the ones sent again the host-driven way (their output was not in the holder's directory). */
  long fallbacks() {
    return fallbackCount.get();
  }

  private ServeRing ringOf(String holder) {
    Ring r = rings.get(holder);
    long now = System.nanoTime();
    if (r != null && r.file() == null && now - r.retryAt() < 0) {
      return null;
    }
    if (r == null || r.file() == null) {
      Path path = ResidentServing.ringPath(ringDir, applicationId, holder, executorId);
      ServeRingFile f = null;
      if (Files.exists(path)) {
        try {
          f = ServeRingFile.open(path);
        } catch (IOException | RuntimeException e) {
          LOG.warn("Slipstream executor {}: cannot map the resident ring {} of holder {} ({})", executorId, path,
              holder, e.toString());
        }
      }
      r = new Ring(f, now + RETRY_NANOS);
      rings.put(holder, r);
      if (f == null) {
        return null;
      }
    }
    return r.file().ring().holderAttached() ? r.file().ring() : null;
  }

  /** Forgets a lost holder's ring; its requests still waiting fail (their landing ranges stay retained). */
  void holderLost(String holder) {
    rings.remove(holder);
    for (Posted p : posted) {
      if (p.holder().equals(holder) && posted.remove(p)) {
        p.answer().completeExceptionally(new IllegalStateException("holder " + holder + " was lost before it answered"
            + " device write request " + p.requestId()));
      }
    }
  }

  private void readAnswers() {
    long lastActive = System.nanoTime();
    while (!closed) {
      boolean any = false;
      long now = System.nanoTime();
      for (Posted p : posted) {
        ServeRing.Answer a = p.ring().poll(p.ticket());
        if (a != null) {
          posted.remove(p);
          any = true;
          complete(p, a);
        } else if (now - p.giveUpAt() > 0) {
          posted.remove(p);
          p.ring().await(p.ticket(), 0); // its slot comes free when the answer does
          p.answer().completeExceptionally(new IllegalStateException("no answer from the resident server of holder "
              + p.holder() + " to device write request " + p.requestId()));
        }
      }
      // While requests wait, the rings are read back to back (an answer is seen within a pass),
      // for SPIN_NANOS after the last answer or post; then every 20 us; with none waiting, the
      // thread sleeps until a post wakes it.
      if (any) {
        lastActive = now;
      } else if (posted.isEmpty()) {
        LockSupport.parkNanos(1_000_000L);
        lastActive = System.nanoTime();
      } else if (now - lastActive > SPIN_NANOS) {
        LockSupport.parkNanos(20_000L);
      } else {
        Thread.onSpinWait();
      }
    }
  }

  private void complete(Posted p, ServeRing.Answer a) {
    if (RingRequests.notInDirectory(a)) {
      // Not in device memory or not in the directory: nothing was written; the holder-driven path serves it.
      fallbackCount.incrementAndGet();
      p.answer().fromRing = false;
      p.fallback().get().whenComplete((r, e) -> {
        if (e != null) {
          p.answer().completeExceptionally(e);
        } else {
          p.answer().complete(r);
        }
      });
      return;
    }
    p.answer().complete(RingRequests.result(p.requestId(), a, p.holder()));
  }

  @Override
  public void close() {
    closed = true;
    LockSupport.unpark(answers);
    try {
      answers.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    for (Posted p : posted) {
      p.answer().completeExceptionally(new IllegalStateException("executor " + executorId + " is stopping"));
    }
    posted.clear();
    rings.clear();
  }
}
