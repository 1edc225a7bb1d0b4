package dev.slipstream.spark.gpu;

import dev.slipstream.core.shuffle.BlockWriter;
import dev.slipstream.core.shuffle.RequestRing;
import dev.slipstream.core.shuffle.ServeTimeline;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.shuffle.SpinningPool;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.shuffle.GpuEndpoint;
import dev.slipstream.gpu.shuffle.PeerLandings;
import dev.slipstream.gpu.shuffle.StagedBlocks;
import dev.slipstream.spark.ExecutorContext;
import dev.slipstream.spark.rpc.PeerInfo;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The GPU side of one executor: opens the GPU Spark assigned it ({@link #attach}) and publishes its
 * GPU endpoint, sends its reduce tasks' device write requests to holders and serves peers' ones.
 * Requests go executor to executor over the shuffle transport, or through the holder's request
 * ring when both share a machine ({@link GpuConf#REQUEST_RING}); answers always come over the
 * transport.
 *
 * <p>Threading: thread-safe. Ownership: {@link #close()} stops the serving threads and closes the
 * GPU (its landing region, map outputs and push lanes).
 */
public final class ExecutorGpu implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ExecutorGpu.class);
  static final int RING_SLOTS = 256;
  /** A slot holds a request of about 50 blocks; larger ones go over the transport. */
  static final int RING_SLOT_BYTES = 2048;
  static final long RING_ABANDON_NANOS = 1_000_000_000L;

  private final ExecutorContext executor;
  private final GpuConf conf;
  private volatile GpuExecutor gpu;
  private volatile String noGpu;
  /** Completes once the GPU plugin's assignment was acted on (at once without the plugin or with mode off). */
  private final CompletableFuture<Void> settled = new CompletableFuture<>();
  /**
   * Starts peers' device write requests: spark.slipstream.gpu.serve.threads threads (none waits for
   * a push; an idle one polls for spark.slipstream.gpu.serve.spin before it parks); with 0, one
   * thread for the requests that cannot start on the transport thread they arrived on (before the
   * GPU is open, or reading map outputs spilled to host memory).
   */
  private final ExecutorService serveThreads;
  /** Producers of the request rings of holders on this machine, by path (empty: that ring could not be opened). */
  private final Map<String, Optional<RequestRing.Producer>> rings = new ConcurrentHashMap<>();
  /** Requests into holders' resident rings (spark.slipstream.gpu.serve.resident); null when off. */
  private volatile ResidentRequests resident;

  /**
   * @param pluginAssigns whether Slipstream's GPU plugin runs on this executor (it then calls
   *     {@link #attach} or {@link #noGpuAssigned}); without it no GPU comes
   */
  public ExecutorGpu(ExecutorContext executor, boolean pluginAssigns) {
    this.executor = executor;
    this.conf = executor.conf().gpu();
    String id = executor.executorId();
    this.noGpu = conf.off() ? GpuConf.MODE.key() + "=off"
        : "executor " + id + " was assigned no GPU (set spark.executor.resource." + conf.resource()
        + ".amount=1 with a discovery script, and spark.plugins=" + SlipstreamGpuPlugin.class.getName() + ")";
    if (conf.off() || !pluginAssigns) {
      settled.complete(null);
    }
    this.serveThreads = SpinningPool.fixed(Math.max(1, conf.serveThreads()), conf.serveSpin().toNanos(), r -> {
      Thread t = new Thread(r, "slipstream-gpu-serve-" + id);
      t.setDaemon(true);
      return t;
    });
    executor.node().setWriter(MemoryKind.DEVICE, this::write);
  }

  /** The executor this is the GPU side of. */
  public ExecutorContext executor() {
    return executor;
  }

  public GpuConf conf() {
    return conf;
  }

  /**
   * Opens the GPU Spark assigned this executor (device {@code ordinal}) and registers its GPU
   * endpoint with the driver, which tells every peer. Without a usable GPU it stays host-only and
   * logs why once, or, with {@code spark.slipstream.gpu.mode=require}, throws.
   */
  public synchronized void attach(int ordinal) throws Exception {
    if (gpu != null || conf.off()) {
      settled.complete(null);
      return;
    }
    String id = executor.executorId();
    try {
      String app = residentApplication();
      GpuExecutor g = GpuExecutor.open(id, executor.host(), ordinal, conf, peer -> executor.knownPeer(peer)
          .map(p -> new PeerLandings.Peer(p.endpoint(), p.gpu())), executor.node().memory(),
          executor.node()::nextRequestId, executor.node().config().fetchTimeout().toMillis(), executor::relay, app,
          executor.spillDir().resolve("gpu"));
      if (app != null) {
        resident = new ResidentRequests(id, app, conf.requestRingDir());
      }
      gpu = g;
      // Readers without a direct device path to this GPU fetch its map outputs over the staging path.
      executor.node().serveAlso(StagedBlocks.source(g.store(), executor.node().config().checksum()));
      executor.publishGpu(withRequestRing(g.endpoint()));
      executor.knownPeers().forEach(this::peerJoined);
    } catch (RuntimeException e) {
      noGpu = "executor " + id + " could not open GPU " + ordinal + ": " + e.getMessage();
      if (conf.required()) {
        throw new IllegalStateException(noGpu + " (" + GpuConf.MODE.key() + "=require)", e);
      }
      LOG.warn("{}; staying on the host path (GPU shuffles fail on this executor)", noGpu);
    } finally {
      settled.complete(null);
    }
  }

  /** Records that no GPU will come (the plugin found no resource); fails the start under mode=require. */
  public void noGpuAssigned(String why) {
    noGpu = "executor " + executor.executorId() + ": " + why;
    settled.complete(null);
    if (conf.required()) {
      throw new IllegalStateException(noGpu + " (" + GpuConf.MODE.key() + "=require)");
    }
    LOG.info("{}; host path only", noGpu);
  }

  /**
   * The application whose executors of this machine share resident serving, or null when
   * spark.slipstream.gpu.serve.resident is off or cannot be used (under spark.authenticate: the
   * rings would bypass the transport's authentication; logged).
   */
  private String residentApplication() {
    if (!conf.serveResident()) {
      return null;
    }
    if (executor.authenticated()) {
      LOG.info("{} is on but not used: with spark.authenticate requests go over the authenticated transport only",
          GpuConf.SERVE_RESIDENT.key());
      return null;
    }
    return executor.node().identity().applicationId();
  }

  /**
   * {@code e} with a request ring this executor serves, when spark.slipstream.gpu.requestRing asks
   * for one and it can be made; else {@code e} as it is (the reason logged).
   */
  private GpuEndpoint withRequestRing(GpuEndpoint e) {
    if (!conf.requestRing()) {
      return e;
    }
    if (executor.authenticated()) {
      LOG.info("{} is on (the default) but not used: with spark.authenticate requests go over the authenticated"
          + " transport only (the ring would bypass its authentication)", GpuConf.REQUEST_RING.key());
      return e;
    }
    try {
      RequestRing ring = RequestRing.create(Path.of(conf.requestRingDir()), RING_SLOTS, RING_SLOT_BYTES,
          RING_ABANDON_NANOS);
      // A ring message names its sender as a HELLO does on the transport without authentication; the
      // file itself is open to this user only.
      executor.node().writeExchange().serveRing(ring, conf.requestRingPoll().toNanos(), executor::isPeerEndpoint);
      LOG.info("Slipstream executor {} serves write requests from its request ring {}", executor.executorId(),
          ring.path());
      return e.withRequestRing(ring.path().toString());
    } catch (IOException | RuntimeException x) {
      LOG.warn("Slipstream executor {} could not make its request ring in {} ({}); requests come over the transport",
          executor.executorId(), conf.requestRingDir(), x.toString());
      return e;
    }
  }

  /** The request ring to write a device write request for {@code holder} into, or null (the transport then). */
  private RequestRing.Producer ringOf(PeerInfo holder) {
    GpuExecutor g = gpu;
    if (!conf.requestRing() || g == null || holder.gpu().isEmpty()) {
      return null;
    }
    GpuEndpoint h = holder.gpu().get();
    if (h.requestRing().isEmpty() || !h.hostId().equals(g.endpoint().hostId())) {
      return null;
    }
    return rings.computeIfAbsent(h.requestRing(), path -> {
      try {
        return Optional.of(RequestRing.open(Path.of(path)));
      } catch (IOException | RuntimeException x) {
        LOG.warn("Slipstream executor {} cannot write into request ring {} of {} ({}); using the transport",
            executor.executorId(), path, holder.endpoint(), x.toString());
        return Optional.empty();
      }
    }).orElse(null);
  }

  /** This executor's GPU, or an exception saying why it has none. */
  public GpuExecutor require() {
    String id = executor.executorId();
    long waitMs = executor.conf().registrationTimeout().toMillis();
    try {
      settled.get(waitMs, TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      throw new IllegalStateException("GPU shuffle: executor " + id + " has not opened its GPU within " + waitMs
          + " ms (" + noGpu + ")");
    } catch (ExecutionException e) {
      throw new IllegalStateException("GPU shuffle: executor " + id + ": " + e.getCause(), e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while waiting for the GPU of executor " + id, e);
    }
    GpuExecutor g = gpu;
    if (g == null) {
      throw new IllegalStateException("GPU shuffle on an executor without a GPU: " + noGpu);
    }
    return g;
  }

  /** This executor's GPU if it is open. */
  public Optional<GpuExecutor> current() {
    return Optional.ofNullable(gpu);
  }

  /**
   * Sends a reduce task's write request into this executor's device landing region to
   * {@code holder} without blocking the task, executor to executor; the holder's answer (or the
   * failure) completes the returned future, so a reduce task keeps requests to several holders in
   * flight. The answer is waited for {@code answerWithin} (past the fetch deadline: it releases
   * retained landing space).
   */
  public CompletableFuture<WriteResult> send(String holder, WriteRequest request, Duration answerWithin) {
    Optional<PeerInfo> p = executor.knownPeer(holder);
    if (p.isEmpty()) {
      return CompletableFuture.failedFuture(new IllegalStateException("executor " + holder
          + " is not in Slipstream's peer table"));
    }
    java.util.function.Supplier<CompletableFuture<WriteResult>> viaTransport =
        () -> executor.node().writeExchange().send(p.get().endpoint(), request, ringOf(p.get()), answerWithin);
    ResidentRequests rr = resident;
    GpuExecutor g = gpu;
    Optional<GpuEndpoint> h = p.get().gpu();
    if (rr != null && g != null && h.isPresent()) {
      Optional<CompletableFuture<WriteResult>> posted = Optional.empty();
      if (g.nicRing(h.get())) {
        // Offered (and used) once the link is connected at both ends, as the push lanes' are.
        Optional<RegionDescriptor> nicLanding = g.nicLandingDescriptor();
        if (nicLanding.isPresent() && g.nicLinked(holder)) {
          posted = rr.trySendRemote(holder, request, nicLanding.get(), answerWithin, viaTransport, g, executor::relay);
        }
      } else if (h.get().hostId().equals(g.endpoint().hostId())) {
        posted = rr.trySend(holder, request, g.landing().export().descriptor(), answerWithin, viaTransport);
      }
      if (posted.isPresent()) {
        return posted.get();
      }
    }
    return viaTransport.get();
  }

  /**
   * The block writer the node's block server hands requests into device landing regions to (it
   * has admitted and checked them): this GPU's {@link GpuExecutor#writer()}, which checks the
   * landing region against the peer table, pins the map outputs and launches the push without
   * waiting for it. A serving thread runs it (spark.slipstream.gpu.serve.threads); with 0 the
   * transport thread the request arrived on does, except for a request that arrives before the GPU
   * is open or that reads map outputs spilled to host memory (copied back first): those go to a
   * serving thread, so a transport thread never waits.
   */
  private void write(EndpointDescriptor from, WriteRequest req, long received, long deadline,
      BlockWriter.Outcome outcome) {
    GpuExecutor g = gpu;
    if (conf.serveThreads() == 0 && settled.isDone() && g != null && g.onDevice(req)) {
      g.writer().write(from, req, received, deadline, outcome);
      return;
    }
    try {
      serveThreads.execute(() -> {
        GpuExecutor opened;
        try {
          opened = require();
        } catch (RuntimeException e) {
          long now = System.nanoTime();
          outcome.done(0, new TransportException(TransportError.UNAVAILABLE, String.valueOf(e.getMessage()), e),
              new ServeTimeline(received, now, 0, 0, 0, 0, 0));
          return;
        }
        opened.writer().write(from, req, received, deadline, outcome);
      });
    } catch (RejectedExecutionException e) {
      outcome.done(0, new TransportException(TransportError.CLOSED, "executor " + executor.executorId()
          + " is stopping"), ServeTimeline.NONE);
    }
  }

  /** A peer registered (or registered again with its GPU): a gpunetio link when both have a NIC. */
  public void peerJoined(PeerInfo p) {
    GpuExecutor g = gpu;
    if (g != null && p.gpu().isPresent()) {
      g.peerJoined(p.executorId(), p.gpu().get());
    }
  }

  /** A peer's gpunetio link offer, relayed by the driver; a bad one is logged and connects nothing. */
  public void nicOffer(dev.slipstream.gpu.nic.NicOffer o) {
    GpuExecutor g = gpu;
    if (g == null) {
      LOG.info("gpunetio link offer from {} dropped: this executor's GPU is not open", o.from());
      return;
    }
    try {
      g.nicOffer(o);
    } catch (RuntimeException e) {
      LOG.warn("gpunetio link offer from {} refused: {}", o.from(), e.getMessage());
      return;
    }
    // Once the link is connected at both ends, this executor offers its copy of a ring to that
    // holder, so the ring is set up before the first request to it.
    ResidentRequests rr = resident;
    Optional<GpuEndpoint> h = executor.knownPeer(o.from()).flatMap(PeerInfo::gpu);
    if (rr != null && h.isPresent() && g.nicRing(h.get()) && g.nicLinked(o.from())) {
      rr.prepareRemote(o.from(), g, executor::relay);
    }
  }

  /**
   * A resident ring's set-up message, relayed by the driver: an offer goes to this executor's
   * resident server (which answers through the driver), an answer to this executor's requests.
   */
  public void ringOffer(dev.slipstream.gpu.serve.RingOffer o) {
    GpuExecutor g = gpu;
    if (g == null) {
      LOG.info("resident ring {} from {} dropped: this executor's GPU is not open", o.kind(), o.from());
      return;
    }
    try {
      if (o.kind() == dev.slipstream.gpu.serve.RingOffer.Kind.OFFER) {
        g.ringOffer(o, executor::relay);
      } else {
        ResidentRequests rr = resident;
        if (rr != null) {
          rr.remoteAnswered(o, g);
        }
      }
    } catch (RuntimeException e) {
      LOG.warn("resident ring {} from {} refused: {}", o.kind(), o.from(), e.getMessage());
    }
  }

  /** Forgets a lost peer: its imported landing region and its request ring. */
  public void peerLost(PeerInfo p) {
    GpuExecutor g = gpu;
    if (g != null && p.gpu().isPresent()) {
      g.peerLost(p.executorId(), p.gpu().get());
    }
    p.gpu().ifPresent(e -> rings.remove(e.requestRing()));
    ResidentRequests rr = resident;
    if (rr != null) {
      rr.holderLost(p.executorId());
    }
  }

  /** Adds the GPU's counters ({@code gpu.*}) to {@code m} when the GPU is open. */
  public void metrics(Map<String, Long> m) {
    GpuExecutor g = gpu;
    if (g != null) {
      m.put("gpu.device", (long) g.context().device());
      m.put("gpu.nicLinks", (long) g.nicPeers().size());
      m.put("gpu.nicRequests", g.writer().overNic());
      m.put("gpu.nicLanes", g.nicLanes());
      m.put("gpu.mapOutputDeviceBytes", g.store().deviceInUse());
      m.put("gpu.mapOutputHostBytes", g.store().hostInUse());
      m.put("gpu.mapOutputSpills", g.store().spills());
      m.put("gpu.mapOutputDiskBytes", g.store().diskInUse());
      m.put("gpu.mapOutputDiskSpills", g.store().diskSpills());
      m.put("gpu.landingInUse", g.landing().used());
      m.put("gpu.landingRetained", g.landing().retainedBytes());
      m.put("gpu.landingRetainedRanges", (long) g.landing().retainedRanges());
      m.put("gpu.landingRetainedPeak", g.landing().peakRetainedBytes());
      m.put("gpu.landingReleasedByBound", g.landing().releasedByBound());
      m.put("gpu.requestsServed", g.server().requestsServed());
      m.put("gpu.bytesServed", g.server().bytesServed());
      m.put("gpu.tableBytesWritten", g.tableBytesWritten());
      g.residentStats().ifPresent(st -> {
        m.put("gpu.residentServed", st.served());
        m.put("gpu.residentRefused", st.failed());
        m.put("gpu.residentBytes", st.bytes());
      });
    }
    ResidentRequests rr = resident;
    if (rr != null) {
      m.put("gpu.residentPosted", rr.posted());
      m.put("gpu.residentFallbacks", rr.fallbacks());
    }
  }

  /** Stops serving, waits up to the fetch timeout for the serving threads, then closes the GPU. */
  @Override
  public void close() {
    serveThreads.shutdownNow();
    ResidentRequests rr = resident;
    resident = null;
    if (rr != null) {
      rr.close();
    }
    GpuExecutor g = gpu;
    gpu = null;
    if (g != null) {
      try {
        serveThreads.awaitTermination(executor.node().config().fetchTimeout().toMillis(), TimeUnit.MILLISECONDS);
        g.close();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (RuntimeException e) {
        LOG.warn("Closing the GPU of executor {}: {}", executor.executorId(), e.toString());
      }
    }
  }
}
