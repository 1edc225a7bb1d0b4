package dev.slipstream.spark;

import dev.slipstream.core.gpu.shuffle.DeviceBlockServer;
import dev.slipstream.core.shuffle.NodeIdentity;
import dev.slipstream.core.shuffle.ServeTimeline;
import dev.slipstream.core.shuffle.ShuffleNode;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.Transports;
import dev.slipstream.spark.rpc.DriverEndpoint;
import dev.slipstream.spark.rpc.ExecutorEndpoint;
import dev.slipstream.spark.rpc.PeerInfo;
import dev.slipstream.spark.rpc.RpcMessages;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.spark.SparkEnv;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcTimeout;
import org.apache.spark.util.RpcUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.concurrent.duration.FiniteDuration;
import scala.reflect.ClassTag$;

/**
 * One executor's Slipstream state: its transport and shuffle node (map-output store, landing
 * pool, block server), its endpoint, and its copy of the driver's peer table.
 *
 * <p>Threading: thread-safe. Ownership: owns the node and its spill folder; {@link #close()}
 * releases all registered memory and deletes the folder.
 */
final class ExecutorRuntime implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ExecutorRuntime.class);

  private final String executorId;
  private final ShuffleNode node;
  private final Path spillDir;
  private final SlipstreamConf conf;
  private final SparkEnv env;
  private final Map<String, PeerInfo> peers = new ConcurrentHashMap<>();
  private final RpcEndpointRef self;
  private final RpcEndpointRef driver;
  private volatile PeerInfo me;
  private final SlipstreamMetricsSource metricsSource;
  private final String host;
  /** spark.authenticate: the transport authenticates peers with Spark's secret (and the request ring is not used). */
  private final boolean authenticate;
  private volatile dev.slipstream.spark.gpu.GpuExecutor gpu;
  private volatile String noGpu;
  /** Completes once the GPU plugin's assignment was acted on (at once without the plugin or with mode off). */
  private final java.util.concurrent.CompletableFuture<Void> gpuSettled = new java.util.concurrent.CompletableFuture<>();
  /**
   * Starts peers' device write requests: spark.slipstream.gpu.serve.threads threads (none waits for
   * a push; an idle one polls for spark.slipstream.gpu.serve.spin before it parks); with 0, one
   * thread for the requests that cannot start on the transport thread they arrived on (before the
   * GPU is open, or reading map outputs spilled to host memory). Made with the first request.
   */
  private final java.util.concurrent.ExecutorService deviceWriteThread;
  /** Waits for the driver's answers to this executor's reduce tasks' device write requests. */
  private final java.util.concurrent.ExecutorService deviceFetchThreads;

  ExecutorRuntime(SparkEnv env, SlipstreamConf conf, Transports transports, boolean localMode) throws Exception {
    this.env = env;
    this.conf = conf;
    this.executorId = env.executorId();
    if ("loopback".equals(conf.transport()) && !localMode) {
      throw new IllegalArgumentException(SlipstreamConf.TRANSPORT.key() + ": got 'loopback', which reaches only one JVM;"
          + " expected 'tcp' (or another network transport) when executors run in their own JVMs");
    }
    this.host = org.apache.spark.util.Utils.localHostName();
    this.noGpu = conf.gpu().off() ? dev.slipstream.spark.gpu.GpuConf.MODE.key() + "=off"
        : "executor " + executorId + " was assigned no GPU (set spark.executor.resource."
        + conf.gpu().resource() + ".amount=1 with a discovery script, and spark.plugins="
        + dev.slipstream.spark.gpu.SlipstreamGpuPlugin.class.getName() + ")";
    if (conf.gpu().off() || !env.conf().get("spark.plugins", "").contains(
        dev.slipstream.spark.gpu.SlipstreamGpuPlugin.class.getName())) {
      gpuSettled.complete(null);
    }
    this.deviceWriteThread = dev.slipstream.core.shuffle.SpinningPool.fixed(Math.max(1, conf.gpu().serveThreads()),
        conf.gpu().serveSpin().toNanos(), r -> {
          Thread t = new Thread(r, "slipstream-gpu-serve-" + executorId);
          t.setDaemon(true);
          return t;
        });
    this.deviceFetchThreads = java.util.concurrent.Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "slipstream-gpu-fetch-" + executorId);
      t.setDaemon(true);
      return t;
    });
    // With spark.authenticate on, the transport gets Spark's shared secret; a transport that
    // cannot authenticate refuses to start rather than accept unauthenticated writes.
    this.authenticate = env.conf().getBoolean("spark.authenticate", false);
    Optional<byte[]> secret = authenticate
        ? Optional.of(env.securityManager().getSecretKey().getBytes(java.nio.charset.StandardCharsets.UTF_8))
        : Optional.empty();
    String applicationId = applicationId(env);
    Transport transport = transports.create(conf.transport(), new TransportContext(conf.source(), host,
        "executor-" + executorId, secret, applicationId, executorId));
    String localDir = org.apache.spark.util.Utils.getLocalDir(env.conf());
    this.spillDir = new File(localDir, "slipstream-" + executorId + "-" + UUID.randomUUID()).toPath();
    this.node = new ShuffleNode(transport, conf.core(), spillDir, new NodeIdentity(applicationId, executorId),
        peerDirectory());
    this.me = new PeerInfo(executorId, host, node.localEndpoint());
    node.deviceWrites().setHandler((from, request, reply) -> serveDeviceWrite(from, request,
        (id, ok, bytes, reason, timeline) -> reply.answer(ok, bytes, reason, timeline)));
    ExecutorEndpoint endpoint = new ExecutorEndpoint(env.rpcEnv(), executorId, this::peerJoined, this::peerLost,
        this::metrics, this::serveDeviceWrite);
    this.self = env.rpcEnv().setupEndpoint(ExecutorEndpoint.NAME_PREFIX + executorId, endpoint);
    this.driver = register();
    this.metricsSource = new SlipstreamMetricsSource(this::metrics);
    env.metricsSystem().registerSource(metricsSource);
  }

  /**
   * The application's id. Executors get it with their configuration; on the driver in local mode
   * SparkContext sets it just after it created the SparkEnv, so this waits for it (with the
   * registration deadline).
   */
  private String applicationId(SparkEnv env) throws InterruptedException {
    long deadline = System.nanoTime() + conf.registrationTimeout().toNanos();
    while (true) {
      scala.Option<String> id = env.conf().getOption("spark.app.id");
      if (id.isDefined()) {
        return id.get();
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("executor " + executorId + ": spark.app.id was not set within "
            + conf.registrationTimeout().toMillis() + " ms (" + SlipstreamConf.REGISTRATION_TIMEOUT.key() + ")");
      }
      Thread.sleep(10);
    }
  }

  /**
   * The peer table the block server writes by: this executor's copy of the driver's, asking the
   * driver on a miss (a peer that registered a moment ago may not have reached this copy yet).
   */
  private dev.slipstream.core.shuffle.PeerDirectory peerDirectory() {
    return new dev.slipstream.core.shuffle.PeerDirectory() {
      @Override
      public dev.slipstream.core.transport.EndpointDescriptor lookup(String id) {
        PeerInfo p = peers.get(id);
        return p == null ? null : p.endpoint();
      }

      @Override
      public dev.slipstream.core.transport.EndpointDescriptor refresh(String id) {
        if (driver == null) {
          return lookup(id); // not registered yet: no reduce task of a peer can know this executor either
        }
        return peerFromDriver(id).map(PeerInfo::endpoint).orElse(null);
      }
    };
  }

  /** Registers with the driver endpoint, retrying until it is up or the deadline passes. */
  private RpcEndpointRef register() throws Exception {
    long deadline = System.nanoTime() + conf.registrationTimeout().toNanos();
    Exception last = null;
    long backoff = 50;
    while (System.nanoTime() < deadline) {
      try {
        RpcEndpointRef d = RpcUtils.makeDriverRef(DriverEndpoint.NAME, env.conf(), env.rpcEnv());
        byte[] reply = d.askSync(new Object[] {RpcMessages.encode(new RpcMessages.Register(me)), self}, timeout(),
            ClassTag$.MODULE$.apply(byte[].class));
        if (RpcMessages.decode(reply) instanceof RpcMessages.Peers p) {
          p.peers().forEach(this::peerJoined);
        }
        LOG.info("Slipstream executor {} registered {} with the driver; {} peers known", executorId,
            node.localEndpoint(), peers.size());
        return d;
      } catch (Exception e) {
        last = e;
        Thread.sleep(backoff);
        backoff = Math.min(1000, backoff * 2);
      }
    }
    throw new IllegalStateException("executor " + executorId + " could not register with the Slipstream driver endpoint within "
        + conf.registrationTimeout().toMillis() + " ms (is spark.shuffle.manager set on the driver too?)", last);
  }

  private RpcTimeout timeout() {
    return new RpcTimeout(FiniteDuration.apply(conf.rpcTimeout().toMillis(), TimeUnit.MILLISECONDS),
        SlipstreamConf.RPC_TIMEOUT.key());
  }

  private void peerJoined(PeerInfo p) {
    peers.put(p.executorId(), p);
  }

  private void peerLost(String id, String reason) {
    PeerInfo p = peers.remove(id);
    if (p != null) {
      node.peerLost(p.endpoint(), reason);
      dev.slipstream.spark.gpu.GpuExecutor g = gpu;
      if (g != null && p.gpu().isPresent()) {
        g.peerLost(id, p.gpu().get());
      }
      p.gpu().ifPresent(e -> rings.remove(e.requestRing()));
    }
  }

  /**
   * Opens the GPU Spark assigned this executor (device {@code ordinal}) and registers its GPU
   * endpoint with the driver, which tells every peer. Without a usable GPU it stays host-only and
   * logs why once, or, with {@code spark.slipstream.gpu.mode=require}, throws.
   */
  synchronized void attachGpu(int ordinal) throws Exception {
    if (gpu != null || conf.gpu().off()) {
      gpuSettled.complete(null);
      return;
    }
    try {
      dev.slipstream.spark.gpu.GpuExecutor g = dev.slipstream.spark.gpu.GpuExecutor.open(executorId, host, ordinal,
          conf.gpu(), id -> Optional.ofNullable(peers.get(id))
              .map(p -> new dev.slipstream.core.gpu.shuffle.PeerLandings.Peer(p.endpoint(), p.gpu())));
      gpu = g;
      // Readers without a direct device path to this GPU fetch its map outputs over the proxy path.
      node.serveAlso(dev.slipstream.core.gpu.shuffle.ProxyBlocks.source(g.store(), node.config().checksum()));
      me = me.withGpu(withRequestRing(g.endpoint()));
      register();
    } catch (RuntimeException e) {
      noGpu = "executor " + executorId + " could not open GPU " + ordinal + ": " + e.getMessage();
      if (conf.gpu().required()) {
        throw new IllegalStateException(noGpu + " (" + dev.slipstream.spark.gpu.GpuConf.MODE.key() + "=require)", e);
      }
      LOG.warn("{}; staying on the host path (GPU shuffles fail on this executor)", noGpu);
    } finally {
      gpuSettled.complete(null);
    }
  }

  /**
   * {@code e} with a request ring this executor serves, when spark.slipstream.gpu.requestRing asks for
   * one and it can be made; else {@code e} as it is (the reason logged).
   */
  private dev.slipstream.core.gpu.shuffle.GpuEndpoint withRequestRing(dev.slipstream.core.gpu.shuffle.GpuEndpoint e) {
    dev.slipstream.spark.gpu.GpuConf c = conf.gpu();
    if (!c.requestRing()) {
      return e;
    }
    if (authenticate || !c.requestsOverTransport()) {
      LOG.info("{} is on (the default) but not used: the ring is for spark.slipstream.gpu.requestPath=transport"
          + " without spark.authenticate (it would bypass the transport's authentication)",
          dev.slipstream.spark.gpu.GpuConf.REQUEST_RING.key());
      return e;
    }
    try {
      dev.slipstream.core.shuffle.RequestRing ring = dev.slipstream.core.shuffle.RequestRing.create(
          java.nio.file.Path.of(c.requestRingDir()), RING_SLOTS, RING_SLOT_BYTES, RING_ABANDON_NANOS);
      // A ring message names its sender as a HELLO does on the transport without authentication; the
      // file itself is open to this user only.
      node.deviceWrites().serveRing(ring, c.requestRingPoll().toNanos(),
          from -> peers.values().stream().anyMatch(p -> p.endpoint().equals(from)));
      LOG.info("Slipstream executor {} serves device write requests from its request ring {}", executorId,
          ring.path());
      return e.withRequestRing(ring.path().toString());
    } catch (java.io.IOException | RuntimeException x) {
      LOG.warn("Slipstream executor {} could not make its request ring in {} ({}); requests come over the transport",
          executorId, c.requestRingDir(), x.toString());
      return e;
    }
  }

  static final int RING_SLOTS = 256;
  /** A slot holds a request of about 50 blocks; larger ones go over the transport. */
  static final int RING_SLOT_BYTES = 2048;
  static final long RING_ABANDON_NANOS = 1_000_000_000L;

  /** Producers of the request rings of holders on this machine, by path (empty: that ring could not be opened). */
  private final Map<String, java.util.Optional<dev.slipstream.core.shuffle.RequestRing.Producer>> rings =
      new ConcurrentHashMap<>();

  /** The request ring to write a device write request for {@code holder} into, or null (the transport then). */
  private dev.slipstream.core.shuffle.RequestRing.Producer ringOf(PeerInfo holder) {
    dev.slipstream.spark.gpu.GpuExecutor g = gpu;
    if (!conf.gpu().requestRing() || g == null || holder.gpu().isEmpty()) {
      return null;
    }
    dev.slipstream.core.gpu.shuffle.GpuEndpoint h = holder.gpu().get();
    if (h.requestRing().isEmpty() || !h.hostId().equals(g.endpoint().hostId())) {
      return null;
    }
    return rings.computeIfAbsent(h.requestRing(), path -> {
      try {
        return java.util.Optional.of(dev.slipstream.core.shuffle.RequestRing.open(java.nio.file.Path.of(path)));
      } catch (java.io.IOException | RuntimeException x) {
        LOG.warn("Slipstream executor {} cannot write into request ring {} of {} ({}); using the transport",
            executorId, path, holder.endpoint(), x.toString());
        return java.util.Optional.empty();
      }
    }).orElse(null);
  }

  /** Records that no GPU will come (the plugin found no resource); fails the start under mode=require. */
  void noGpuAssigned(String why) {
    noGpu = "executor " + executorId + ": " + why;
    gpuSettled.complete(null);
    if (conf.gpu().required()) {
      throw new IllegalStateException(noGpu + " (" + dev.slipstream.spark.gpu.GpuConf.MODE.key() + "=require)");
    }
    LOG.info("{}; host path only", noGpu);
  }

  /** This executor's GPU, or an exception saying why it has none. */
  dev.slipstream.spark.gpu.GpuExecutor requireGpu() {
    try {
      gpuSettled.get(conf.registrationTimeout().toMillis(), TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.TimeoutException e) {
      throw new IllegalStateException("GPU shuffle: executor " + executorId + " has not opened its GPU within "
          + conf.registrationTimeout().toMillis() + " ms (" + noGpu + ")");
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IllegalStateException("GPU shuffle: executor " + executorId + ": " + e.getCause(), e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while waiting for the GPU of executor " + executorId, e);
    }
    dev.slipstream.spark.gpu.GpuExecutor g = gpu;
    if (g == null) {
      throw new IllegalStateException("GPU shuffle on an executor without a GPU: " + noGpu);
    }
    return g;
  }

  java.util.Optional<dev.slipstream.spark.gpu.GpuExecutor> gpu() {
    return java.util.Optional.ofNullable(gpu);
  }

  /**
   * Sends a device write request to executor {@code holder} through the driver (executors cannot
   * reach each other over Spark RPC) and returns the holder's answer; waits at most the fetch
   * timeout.
   */
  RpcMessages.DeviceWriteResult sendDeviceWrite(String holder, byte[] request, java.time.Duration answerWithin)
      throws TransportException {
    RpcTimeout t = new RpcTimeout(FiniteDuration.apply(answerWithin.toMillis(), TimeUnit.MILLISECONDS),
        dev.slipstream.core.config.CoreConfig.FETCH_TIMEOUT.key());
    byte[] reply = driver.askSync(RpcMessages.encode(new RpcMessages.ForwardDeviceWrite(holder, request)), t,
        ClassTag$.MODULE$.apply(byte[].class));
    if (RpcMessages.decode(reply) instanceof RpcMessages.DeviceWriteResult r) {
      return r;
    }
    throw new TransportException(dev.slipstream.core.transport.TransportError.MALFORMED,
        "device write to executor " + holder + ": the driver answered with another message, expected a result");
  }

  /**
   * Sends a reduce task's device write request to {@code holder} without blocking the task: executor
   * to executor over the transport (spark.slipstream.gpu.requestPath=transport, the default), or
   * relayed by the driver ({@link #sendDeviceWrite}); the answer (or the failure) completes the
   * returned future, so a reduce task keeps requests to several holders in flight. The answer is
   * waited for {@code answerWithin} (past the fetch deadline: it releases retained landing space).
   */
  java.util.concurrent.CompletableFuture<RpcMessages.DeviceWriteResult> sendDeviceWriteAsync(String holder,
      byte[] request, java.time.Duration answerWithin) {
    java.util.concurrent.CompletableFuture<RpcMessages.DeviceWriteResult> f = new java.util.concurrent.CompletableFuture<>();
    if (conf.gpu().requestsOverTransport()) {
      PeerInfo p = peers.get(holder);
      if (p == null) {
        f.completeExceptionally(new IllegalStateException("executor " + holder + " is not in Slipstream's peer table"));
        return f;
      }
      return node.deviceWrites().send(p.endpoint(), request, ringOf(p), answerWithin)
          .thenApply(r -> new RpcMessages.DeviceWriteResult(r.id(), r.ok(), r.bytes(), r.reason(), r.timeline()));
    }
    try {
      deviceFetchThreads.execute(() -> {
        try {
          f.complete(sendDeviceWrite(holder, request, answerWithin));
        } catch (Throwable e) {
          f.completeExceptionally(e);
        }
      });
    } catch (java.util.concurrent.RejectedExecutionException e) {
      f.completeExceptionally(new IllegalStateException("executor " + executorId + " is stopping"));
    }
    return f;
  }

  /**
   * An answer to a device write request, with the request's id (-1 when it did not decode) and when
   * it was served.
   */
  @FunctionalInterface
  private interface DeviceWriteAnswer {
    void answer(long requestId, boolean ok, long bytes, String reason, ServeTimeline timeline);
  }

  /** Serves a device write request relayed by the driver; the RPC reply is sent exactly once. */
  private void serveDeviceWrite(byte[] request, java.util.function.Consumer<byte[]> reply) {
    serveDeviceWrite(null, request, (id, ok, bytes, reason, timeline) -> reply.accept(RpcMessages.encode(
        new RpcMessages.DeviceWriteResult(id, ok, bytes, reason, timeline.answeredAt(System.nanoTime())))));
  }

  /**
   * Serves a peer's device write request; the answer is given exactly once. A serving thread
   * ({@code deviceWriteThread}) decodes it, checks it, pins its map outputs and launches its push
   * (or queues it for a free lane) without waiting for the push; the block server's completion
   * thread answers once the kernel ended. With spark.slipstream.gpu.serve.threads=0 this happens on
   * the thread the request arrived on (a transport event loop, or the RPC dispatcher for the driver
   * relay), except for a request that arrives before the GPU is open or that reads map outputs
   * spilled to host memory (copied back first): those go to {@code deviceWriteThread}, so a
   * transport thread never waits. {@code from}: the transport sender (null: relayed by the driver),
   * which must be the reader's registered endpoint.
   */
  private void serveDeviceWrite(dev.slipstream.core.transport.EndpointDescriptor from, byte[] request,
      DeviceWriteAnswer answer) {
    long received = System.nanoTime();
    dev.slipstream.spark.gpu.GpuExecutor g = gpu;
    if (conf.gpu().serveThreads() > 0 || !gpuSettled.isDone() || g == null) {
      offload(from, request, answer, received);
      return;
    }
    dev.slipstream.core.gpu.shuffle.DeviceWriteRequest req;
    try {
      req = dev.slipstream.core.gpu.shuffle.DeviceWriteRequest.decode(request);
    } catch (Exception e) {
      answer.answer(-1, false, 0, String.valueOf(e.getMessage()), new ServeTimeline(received, received, 0, 0, 0, 0, 0));
      return;
    }
    if (!g.onDevice(req)) {
      offload(from, request, answer, received);
      return;
    }
    start(g, from, req, answer, received, System.nanoTime());
  }

  /** Serves a request from {@code deviceWriteThread} (it may wait for the GPU to open, or restore spilled outputs). */
  private void offload(dev.slipstream.core.transport.EndpointDescriptor from, byte[] request, DeviceWriteAnswer answer,
      long received) {
    try {
      deviceWriteThread.execute(() -> {
        long started = System.nanoTime();
        long id = -1;
        try {
          dev.slipstream.spark.gpu.GpuExecutor g = requireGpu();
          dev.slipstream.core.gpu.shuffle.DeviceWriteRequest req =
              dev.slipstream.core.gpu.shuffle.DeviceWriteRequest.decode(request);
          id = req.requestId();
          start(g, from, req, answer, received, started);
        } catch (Exception e) {
          answer.answer(id, false, 0, String.valueOf(e.getMessage()), new ServeTimeline(received, started, 0, 0, 0, 0, 0));
        }
      });
    } catch (java.util.concurrent.RejectedExecutionException e) {
      answer.answer(-1, false, 0, "executor " + executorId + " is stopping", ServeTimeline.NONE);
    }
  }

  /** Starts the push; the answer follows its end (or comes now when the request is refused). */
  private void start(dev.slipstream.spark.gpu.GpuExecutor g, dev.slipstream.core.transport.EndpointDescriptor from,
      dev.slipstream.core.gpu.shuffle.DeviceWriteRequest req, DeviceWriteAnswer answer, long received, long started) {
    long[] marks = new long[DeviceBlockServer.MARKS];
    try {
      g.start(req, from, received, conf.core().fetchTimeout().toMillis(), marks, (bytes, error) -> answer.answer(req.requestId(),
          error == null, bytes, error == null ? "" : String.valueOf(error.getMessage()), timeline(received, started,
          marks)));
    } catch (Exception e) {
      answer.answer(req.requestId(), false, 0, String.valueOf(e.getMessage()), timeline(received, started, marks));
    }
  }

  private static ServeTimeline timeline(long received, long started, long[] marks) {
    return new ServeTimeline(received, started, marks[DeviceBlockServer.MARK_CHECKED],
        marks[DeviceBlockServer.MARK_LANE_READY], marks[DeviceBlockServer.MARK_LAUNCHED],
        marks[DeviceBlockServer.MARK_ENDED], 0);
  }

  String executorId() {
    return executorId;
  }

  dev.slipstream.spark.gpu.GpuConf gpuConf() {
    return conf.gpu();
  }

  ShuffleNode node() {
    return node;
  }

  PeerInfo self() {
    return me;
  }

  /** The peer, from the local table or else from the driver; empty when the driver does not know it. */
  Optional<PeerInfo> peer(String id) {
    PeerInfo p = peers.get(id);
    if (p != null) {
      return Optional.of(p);
    }
    return peerFromDriver(id);
  }

  /**
   * The peer as the driver knows it now (a GPU endpoint registered after the copy here was made
   * reaches this executor through PeerJoined, which may still be on its way).
   */
  Optional<PeerInfo> peerFromDriver(String id) {
    try {
      byte[] reply = driver.askSync(RpcMessages.encode(new RpcMessages.Lookup(id, executorId)), timeout(),
          ClassTag$.MODULE$.apply(byte[].class));
      if (RpcMessages.decode(reply) instanceof RpcMessages.Peers ps && !ps.peers().isEmpty()) {
        peerJoined(ps.peers().get(0));
        return Optional.of(ps.peers().get(0));
      }
    } catch (TransportException | RuntimeException e) {
      LOG.warn("Peer lookup of executor {} failed: {}", id, e.toString());
    }
    return Optional.empty();
  }

  Map<String, Long> metrics() {
    Map<String, Long> m = new LinkedHashMap<>();
    var t = node.transport().metrics();
    m.put("transport.bytesWritten", t.bytesWritten());
    m.put("transport.writes", t.writes());
    m.put("transport.signals", t.signals());
    m.put("transport.bytesReceived", t.bytesReceived());
    m.put("transport.writesReceived", t.writesReceived());
    m.put("transport.rejected", t.rejected());
    m.put("transport.failed", t.failed());
    m.put("transport.authenticated", t.authenticated());
    m.put("transport.authFailures", t.authFailures());
    m.put("requests.sent", node.requestsSent());
    m.put("requests.failed", node.requestsFailed());
    m.put("requests.served", node.requestsServed());
    m.put("requests.serveFailures", node.serveFailures());
    m.put("requests.refused", node.requestsRefused());
    m.put("requests.writesTimedOut", node.writesTimedOut());
    m.put("requests.writesRetried", node.writesRetried());
    m.put("requests.checksumRetries", node.checksumRetries());
    m.put("bytes.fetched", node.bytesFetched());
    m.put("bytes.served", node.bytesServed());
    m.put("memory.registered", node.registeredBytes());
    m.put("memory.mapOutputInUse", node.store().memoryInUse());
    m.put("memory.landingInUse", node.landing().used());
    m.put("memory.landingPeak", node.landing().peak());
    m.put("memory.landingBytes", node.landing().capacity());
    m.put("process.pid", ProcessHandle.current().pid());
    m.put("mapOutput.count", (long) node.store().outputCount());
    m.put("mapOutput.spills", node.store().spills());
    m.put("mapOutput.evictions", node.store().evictions());
    long files;
    try {
      files = node.store().spillFilesOnDisk();
    } catch (IOException e) {
      files = -1;
    }
    m.put("mapOutput.spillFiles", files);
    m.put("transport.regions", (long) node.transport().registeredRegionCount());
    dev.slipstream.spark.gpu.GpuExecutor g = gpu;
    if (g != null) {
      m.put("gpu.device", (long) g.context().device());
      m.put("gpu.mapOutputDeviceBytes", g.store().deviceInUse());
      m.put("gpu.mapOutputHostBytes", g.store().hostInUse());
      m.put("gpu.mapOutputSpills", g.store().spills());
      m.put("gpu.landingInUse", g.landing().used());
      m.put("gpu.landingRetained", g.landing().retainedBytes());
      m.put("gpu.landingRetainedRanges", (long) g.landing().retainedRanges());
      m.put("gpu.landingRetainedPeak", g.landing().peakRetainedBytes());
      m.put("gpu.landingReleasedByBound", g.landing().releasedByBound());
      m.put("gpu.requestsServed", g.server().requestsServed());
      m.put("gpu.bytesServed", g.server().bytesServed());
    }
    return m;
  }

  @Override
  public void close() {
    try {
      env.metricsSystem().removeSource(metricsSource);
    } catch (RuntimeException e) {
      LOG.debug("Removing the metrics source: {}", e.toString());
    }
    try {
      env.rpcEnv().stop(self);
    } catch (RuntimeException e) {
      LOG.debug("Stopping the executor endpoint: {}", e.toString());
    }
    deviceWriteThread.shutdownNow();
    deviceFetchThreads.shutdownNow();
    dev.slipstream.spark.gpu.GpuExecutor g = gpu;
    gpu = null;
    if (g != null) {
      try {
        deviceWriteThread.awaitTermination(conf.core().fetchTimeout().toMillis(), TimeUnit.MILLISECONDS);
        g.close();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (RuntimeException e) {
        LOG.warn("Closing the GPU of executor {}: {}", executorId, e.toString());
      }
    }
    node.close();
    try (Stream<Path> s = Files.exists(spillDir) ? Files.walk(spillDir) : Stream.empty()) {
      s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      LOG.warn("Could not delete {}: {}", spillDir, e.toString());
    }
  }
}
