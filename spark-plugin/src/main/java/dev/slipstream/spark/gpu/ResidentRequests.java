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
 * <p>A holder whose rings go over the NIC ({@link GpuExecutor#nicRing}: another machine) is offered a
 * copy of a ring made here once the link to it is connected at both ends ({@link #prepareRemote}; or
 * by the first request to it, {@link #trySendRemote}, which then goes the host-driven way while the
 * holder sets up its side); once it accepts, requests are written into this copy and
 * published into the holder's copy from this host ({@link dev.slipstream.gpu.RemoteRing}), their
 * deadlines in the holder's clock as estimated from its answer (good to half the offer's round trip
 * through the driver), and the kernel's answers arrive in this copy, read as those of rings of this
 * machine are. A refused offer is offered again after {@link #OFFER_AGAIN_NANOS}.
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
  /** How long after a holder refused a ring over the NIC (or never answered) this executor offers one again. */
  static final long OFFER_AGAIN_NANOS = 10_000_000_000L;
  /** Slots of this executor's copy of a holder's ring over the NIC. */
  static final int REMOTE_RING_SLOTS = ResidentServing.RING_SLOTS;

  private final String executorId;
  private final String applicationId;
  private final String ringDir;
  private final Map<String, Ring> rings = new ConcurrentHashMap<>();
  private final Map<String, Remote> remotes = new ConcurrentHashMap<>();
  private final ConcurrentLinkedQueue<Posted> posted = new ConcurrentLinkedQueue<>();
  private final Thread answers;
  private final java.util.concurrent.atomic.AtomicLong postedCount = new java.util.concurrent.atomic.AtomicLong();
  private final java.util.concurrent.atomic.AtomicLong fallbackCount = new java.util.concurrent.atomic.AtomicLong();
  private volatile boolean closed;

  /** A holder's ring as this reader sees it: mapped (null until the file exists), or looked for again after {@code retryAt}. */
  private record Ring(ServeRingFile file, long retryAt) {}

  /**
   * A holder's ring over the NIC as this reader has it: its copy, when it was offered, and once the
   * holder accepted, the host queue pair's lease it publishes on and the holder's clock less this one.
   */
  private static final class Remote {
    final dev.slipstream.gpu.RemoteRing copy;
    final long offeredAt;
    volatile dev.slipstream.gpu.nic.NicLinks.Lease host;
    volatile long clockOffset;
    volatile boolean ready;

    Remote(dev.slipstream.gpu.RemoteRing copy, long offeredAt) {
      this.copy = copy;
      this.offeredAt = offeredAt;
    }

    void close() {
      try {
        if (copy != null) {
          copy.close();
        }
      } catch (IOException | RuntimeException e) {
        LOG.debug("closing {}: {}", copy, e.toString());
      }
      dev.slipstream.gpu.nic.NicLinks.Lease l = host;
      if (l != null) {
        l.close();
      }
    }
  }

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
    return post(holder, ring, req, ownLanding.key(), System.nanoTime(), 0, answerWithin, fallback);
  }

  /**
   * Posts {@code req} into {@code ring} (its deadline in the holder's clock: this one's plus
   * {@code clockOffset}) and waits for its answer there; empty when the ring is broken.
   */
  private Optional<CompletableFuture<WriteResult>> post(String holder, ServeRing ring, WriteRequest req, long key,
      long now, long clockOffset, Duration answerWithin, Supplier<CompletableFuture<WriteResult>> fallback) {
    long ticket = ring.post(RingRequests.request(req, key, now + clockOffset), 1_000_000_000L);
    if (ticket < 0) {
      RuntimeException why = ring.publishFailure();
      LOG.warn("Slipstream executor {}: the resident ring of holder {} is broken ({}); its requests go the host-driven"
          + " way", executorId, holder, why != null ? why.toString() : "a request was never answered");
      return Optional.empty();
    }
    postedCount.incrementAndGet();
    RingAnswer answer = new RingAnswer();
    posted.add(new Posted(holder, ring, ticket, req.requestId(), now + answerWithin.toNanos(), answer, fallback));
    LockSupport.unpark(answers);
    return Optional.of(answer);
  }

  /**
   * As {@link #trySend}, for holder {@code holder} whose rings go over the NIC: {@code ownLanding} is
   * this executor's NIC landing region; {@code gpu} makes the copy of the ring and leases the link's
   * host queue pair. Empty until the holder accepted this executor's offer (which the first call
   * sends through {@code relay}).
   */
  Optional<CompletableFuture<WriteResult>> trySendRemote(String holder, WriteRequest req, RegionDescriptor ownLanding,
      Duration answerWithin, Supplier<CompletableFuture<WriteResult>> fallback, GpuExecutor gpu,
      java.util.function.Consumer<dev.slipstream.gpu.serve.RingOffer> relay) {
    if (closed || !RingRequests.fits(req) || !req.landing().equals(ownLanding)) {
      return Optional.empty();
    }
    long now = System.nanoTime();
    Remote r = remotes.get(holder);
    if (r == null || (!r.ready && now - r.offeredAt > OFFER_AGAIN_NANOS)) {
      offer(holder, r, now, gpu, relay);
      return Optional.empty();
    }
    if (!r.ready || r.copy == null || r.copy.ring().broken()) {
      return Optional.empty();
    }
    return post(holder, r.copy.ring(), req, ownLanding.key(), now, r.clockOffset, answerWithin, fallback);
  }

  /**
   * Offers holder {@code holder} a copy of a ring over the NIC unless one was offered already (the
   * link to it just connected at both ends), so that its first request finds the ring set up.
   */
  void prepareRemote(String holder, GpuExecutor gpu,
      java.util.function.Consumer<dev.slipstream.gpu.serve.RingOffer> relay) {
    if (!closed && !remotes.containsKey(holder)) {
      offer(holder, null, System.nanoTime(), gpu, relay);
    }
  }

  /** Makes a copy of holder {@code holder}'s ring (replacing {@code old}) and offers it to the holder. */
  private synchronized void offer(String holder, Remote old, long now, GpuExecutor gpu,
      java.util.function.Consumer<dev.slipstream.gpu.serve.RingOffer> relay) {
    if (closed || remotes.get(holder) != old) {
      return; // another thread offered meanwhile
    }
    if (old != null) {
      remotes.remove(holder);
      old.close();
    }
    Remote made = null;
    try {
      dev.slipstream.gpu.RemoteRing copy = gpu.remoteRingCopy(ringDir, applicationId, holder, REMOTE_RING_SLOTS);
      made = new Remote(copy, now);
      remotes.put(holder, made);
      relay.accept(dev.slipstream.gpu.serve.RingOffer.offer(executorId, holder, copy.regionId(), copy.key(),
          REMOTE_RING_SLOTS, System.nanoTime()));
    } catch (IOException | RuntimeException e) {
      // Offered again after OFFER_AGAIN_NANOS; until then requests to it go the host-driven way.
      LOG.warn("Slipstream executor {}: no resident ring over the NIC to holder {} ({}); its requests go the"
          + " host-driven way", executorId, holder, e.toString());
      if (made != null) {
        made.close(); // the offer never left: nothing will answer into this copy
      }
      remotes.put(holder, new Remote(null, now));
    }
  }

  /**
   * A holder's answer to this executor's offer: accepted, the copy is connected to the holder's
   * over the link's host queue pair (leased from {@code gpu}); refused, it waits to be offered again.
   */
  void remoteAnswered(dev.slipstream.gpu.serve.RingOffer o, GpuExecutor gpu) {
    Remote r = remotes.get(o.from());
    if (r == null || r.copy == null || r.ready) {
      return; // an answer to an offer replaced since, or a duplicate
    }
    long now = System.nanoTime();
    if (o.kind() != dev.slipstream.gpu.serve.RingOffer.Kind.ACCEPT) {
      LOG.info("Slipstream executor {}: holder {} serves no resident ring over the NIC to it ({}); its requests go"
          + " the host-driven way", executorId, o.from(), o.reason());
      return;
    }
    try {
      dev.slipstream.gpu.nic.NicLinks.Lease lease = gpu.ringHostLease(o.from()).orElseThrow(
          () -> new IllegalStateException("no connected gpunetio link to holder " + o.from()));
      r.host = lease;
      r.copy.connect(gpu.hostQueue(lease), o.regionId(), o.key(), 1_000_000_000L);
      // The holder read its clock between the offer's send and this answer: about half way.
      r.clockOffset = o.nanos() - (r.offeredAt + (now - r.offeredAt) / 2);
      r.ready = true;
      LOG.info("Slipstream executor {} posts into the resident ring of holder {} over the NIC (holder's clock {} us"
          + " ahead, within {} us)", executorId, o.from(), r.clockOffset / 1000, (now - r.offeredAt) / 2000);
    } catch (RuntimeException e) {
      LOG.warn("Slipstream executor {}: holder {} accepted a resident ring over the NIC, but it cannot be used ({});"
          + " its requests go the host-driven way", executorId, o.from(), e.toString());
    }
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
    Remote remote = remotes.remove(holder);
    for (Posted p : posted) {
      if (p.holder().equals(holder) && posted.remove(p)) {
        p.answer().completeExceptionally(new IllegalStateException("holder " + holder + " was lost before it answered"
            + " device write request " + p.requestId()));
      }
    }
    if (remote != null) {
      remote.close(); // its kernel writes nothing more into this copy: its process is gone
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
    remotes.values().forEach(Remote::close);
    remotes.clear();
  }
}
