package dev.slipstream.spark;

import dev.slipstream.core.shuffle.NodeIdentity;
import dev.slipstream.core.shuffle.ShuffleNode;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.Transports;
import dev.slipstream.gpu.shuffle.GpuEndpoint;
import dev.slipstream.spark.gpu.ExecutorGpu;
import dev.slipstream.spark.gpu.SlipstreamGpuPlugin;
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
final class ExecutorRuntime implements ExecutorContext, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ExecutorRuntime.class);

  private final String executorId;
  private final ShuffleNode node;
  private final Path spillDir;
  private final SlipstreamConf conf;
  private final SparkEnv env;
  private final Map<String, PeerInfo> peers = new ConcurrentHashMap<>();
  /** Peers connected to as they became known ({@link #connectEagerly}): asked for, and opened. */
  private final java.util.concurrent.atomic.AtomicInteger eagerAsked = new java.util.concurrent.atomic.AtomicInteger();
  private final java.util.concurrent.atomic.AtomicInteger eagerOpened = new java.util.concurrent.atomic.AtomicInteger();
  private final RpcEndpointRef self;
  private final RpcEndpointRef driver;
  private volatile PeerInfo me;
  private final SlipstreamMetricsSource metricsSource;
  private final String host;
  /** spark.authenticate: the transport authenticates peers with Spark's secret (and the request ring is not used). */
  private final boolean authenticate;
  /** The GPU side: opens the GPU Spark assigned, sends and serves device write requests. */
  private final ExecutorGpu gpu;
  /**
   * Runs the shuffle codec beside the tasks (encode lanes, decoding ahead); null with
   * {@code codec.threads} 0, or when Spark's stream wrapping does no work (no compression, no I/O
   * encryption), so there is nothing to move off the task threads.
   */
  private final java.util.concurrent.ThreadPoolExecutor codecPool;
  private final java.util.concurrent.atomic.AtomicLong decodedAhead = new java.util.concurrent.atomic.AtomicLong();
  private final java.util.concurrent.atomic.AtomicLong encodedAhead = new java.util.concurrent.atomic.AtomicLong();
  private final java.util.concurrent.atomic.AtomicLong encodedOnTask = new java.util.concurrent.atomic.AtomicLong();

  ExecutorRuntime(SparkEnv env, SlipstreamConf conf, Transports transports, boolean localMode) throws Exception {
    this.env = env;
    this.conf = conf;
    this.executorId = env.executorId();
    if ("loopback".equals(conf.transport()) && !localMode) {
      throw new IllegalArgumentException(SlipstreamConf.TRANSPORT.key() + ": got 'loopback', which reaches only one JVM;"
          + " expected 'tcp' (or another network transport) when executors run in their own JVMs");
    }
    this.host = org.apache.spark.util.Utils.localHostName();
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
    // Spark's allocator maps the pools without zeroing them: a 96 MiB landing pool then costs no
    // start-up time (ByteBuffer.allocateDirect writes every byte first), and pages come from the
    // kernel as they are first written.
    this.node = new ShuffleNode(transport, conf.core(), spillDir, new NodeIdentity(applicationId, executorId),
        peerDirectory(), org.apache.spark.unsafe.Platform::allocateDirectBuffer);
    this.me = new PeerInfo(executorId, host, node.localEndpoint());
    this.gpu = new ExecutorGpu(this, env.conf().get("spark.plugins", "").contains(SlipstreamGpuPlugin.class.getName()));
    boolean codecWorks = env.conf().getBoolean("spark.shuffle.compress", true)
        || env.conf().getBoolean("spark.io.encryption.enabled", false);
    this.codecPool = conf.codecThreads() == 0 || !codecWorks ? null : codecPool(conf.codecThreads());
    ExecutorEndpoint endpoint = new ExecutorEndpoint(env.rpcEnv(), executorId, this::peerJoined, this::peerLost,
        this::metrics, o -> gpu.nicOffer(o), o -> gpu.ringOffer(o));
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
        LOG.info("Slipstream executor {} registered {} with the driver; {} peers known; {} codec threads ({}={})",
            executorId, node.localEndpoint(), peers.size(), codecPool == null ? 0 : codecPool.getMaximumPoolSize(),
            SlipstreamConf.CODEC_THREADS.key(), SlipstreamConf.CODEC_THREADS.get(conf.source()));
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
    PeerInfo before = peers.get(p.executorId());
    if (before == null || !before.endpoint().equals(p.endpoint())) {
      connectEagerly(p);
    }
    peers.put(p.executorId(), p);
    if (gpu != null) {
      gpu.peerJoined(p);
    }
  }

  /**
   * Opens the connection to a peer now, up to {@link SlipstreamConf#EAGER_PEERS} peers, so that
   * the first fetch from it (and the first write into it) does not wait for the connect and the
   * handshake. The transport connects in the background; a peer that cannot be reached now is
   * connected again at first use, which reports the failure.
   */
  private void connectEagerly(PeerInfo p) {
    if (p.executorId().equals(executorId) || eagerAsked.incrementAndGet() > conf.eagerPeers()) {
      return;
    }
    try {
      node.transport().connect(p.endpoint());
      eagerOpened.incrementAndGet();
    } catch (TransportException | RuntimeException e) {
      LOG.debug("Connecting early to executor {} at {} failed: {}", p.executorId(), p.endpoint(), e.toString());
    }
  }

  private void peerLost(String id, String reason) {
    PeerInfo p = peers.remove(id);
    if (p != null) {
      node.peerLost(p.endpoint(), reason);
      gpu.peerLost(p);
    }
  }

  /** The GPU side of this executor. */
  ExecutorGpu gpu() {
    return gpu;
  }

  @Override
  public void publishGpu(GpuEndpoint endpoint) throws Exception {
    me = me.withGpu(endpoint);
    register();
  }

  @Override
  public java.util.Collection<PeerInfo> knownPeers() {
    return java.util.List.copyOf(peers.values());
  }

  @Override
  public void relay(dev.slipstream.gpu.nic.NicOffer offer) {
    toDriver(new RpcMessages.NicOfferMessage(offer));
  }

  @Override
  public void relay(dev.slipstream.gpu.serve.RingOffer offer) {
    toDriver(new RpcMessages.RingOfferMessage(offer));
  }

  private void toDriver(RpcMessages.Message m) {
    RpcEndpointRef d = driver;
    if (d == null) {
      throw new IllegalStateException("executor " + executorId + " is not registered with the driver yet");
    }
    d.send(RpcMessages.encode(m));
  }

  @Override
  public String executorId() {
    return executorId;
  }

  @Override
  public String host() {
    return host;
  }

  @Override
  public ShuffleNode node() {
    return node;
  }

  @Override
  public Path spillDir() {
    return spillDir;
  }

  @Override
  public SlipstreamConf conf() {
    return conf;
  }

  @Override
  public boolean authenticated() {
    return authenticate;
  }

  @Override
  public Optional<PeerInfo> knownPeer(String id) {
    return Optional.ofNullable(peers.get(id));
  }

  @Override
  public boolean isPeerEndpoint(EndpointDescriptor endpoint) {
    return peers.values().stream().anyMatch(p -> p.endpoint().equals(endpoint));
  }

  PeerInfo self() {
    return me;
  }

  @Override
  public Optional<PeerInfo> peer(String id) {
    PeerInfo p = peers.get(id);
    if (p != null) {
      return Optional.of(p);
    }
    return peerFromDriver(id);
  }

  @Override
  public Optional<PeerInfo> peerFromDriver(String id) {
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
    m.put("peers.known", (long) peers.size());
    m.put("peers.connectedEarly", (long) eagerOpened.get());
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
    m.put("reader.bytesDecodedAhead", decodedAhead.get());
    m.put("writer.bytesEncodedAhead", encodedAhead.get());
    m.put("writer.bytesEncodedOnTask", encodedOnTask.get());
    m.put("transport.regions", (long) node.transport().registeredRegionCount());
    gpu.metrics(m);
    return m;
  }

  /** Daemon threads, started as work comes and ended after a minute idle; jobs wait in an unbounded queue. */
  private static java.util.concurrent.ThreadPoolExecutor codecPool(int threads) {
    java.util.concurrent.atomic.AtomicInteger n = new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.ThreadPoolExecutor p = new java.util.concurrent.ThreadPoolExecutor(threads, threads, 60,
        java.util.concurrent.TimeUnit.SECONDS, new java.util.concurrent.LinkedBlockingQueue<>(), r -> {
          Thread t = new Thread(r, "slipstream-codec-" + n.incrementAndGet());
          t.setDaemon(true);
          return t;
        });
    p.allowCoreThreadTimeOut(true);
    return p;
  }

  /** The executor's codec pool, or null when the codec runs (if at all) on the task threads. */
  java.util.concurrent.Executor codecPool() {
    return codecPool;
  }

  /** Counts bytes a reduce task's blocks were decoded ahead on the pool (at the task's end). */
  void decodedAhead(long bytes) {
    decodedAhead.addAndGet(bytes);
  }

  /**
   * Counts a map task's bytes its encode lanes handed to the codec threads ({@code ahead}) and
   * those the task encoded itself because the threads were behind ({@code onTask}).
   */
  void encoded(long ahead, long onTask) {
    encodedAhead.addAndGet(ahead);
    encodedOnTask.addAndGet(onTask);
  }

  @Override
  public void close() {
    if (codecPool != null) {
      // Tasks are done by now; their readers and writers waited for their running jobs when they ended.
      codecPool.shutdownNow();
    }
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
    gpu.close();
    node.close();
    try (Stream<Path> s = Files.exists(spillDir) ? Files.walk(spillDir) : Stream.empty()) {
      s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      LOG.warn("Could not delete {}: {}", spillDir, e.toString());
    }
  }
}
