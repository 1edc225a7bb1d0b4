package dev.slipstream.spark;

import dev.slipstream.core.transport.Transports;
import dev.slipstream.spark.rpc.DriverEndpoint;
import dev.slipstream.spark.shim.SparkShim;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkContext$;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Slipstream's entry point: {@code spark.shuffle.manager=dev.slipstream.spark.SlipstreamShuffleManager}.
 *
 * <p>It is a {@link SortShuffleManager} to Spark, and keeps that class's promise: no writer holds
 * on to a record object after it returned from the iterator, except where Spark's own sort
 * shuffle would (map-side combine, or a serializer that cannot relocate records). Spark SQL
 * relies on it to pass its reused rows to the shuffle without copying each one
 * ({@code ShuffleExchangeExec.needToCopyObjectsBeforeShuffle}). Slipstream's writers: the direct
 * writer (at most {@code spark.slipstream.writer.directPartitionsMax} partitions) serializes each
 * record at once; above that, without map-side combine and with a relocatable serializer, Spark's
 * serialized sort ({@link SerializedWriter}) writes into the map-output store; otherwise Spark's
 * {@code ExternalSorter}. Code that checks for a {@code SortShuffleManager} and then reads blocks
 * through the block manager is served by {@link StoreBlockResolver}. Everything else of the
 * superclass (its index files, its writers and reader) is used only when this manager falls back
 * to Spark's sort shuffle ({@link #isFallback()}).
 *
 * <p>Start-up: the configuration is validated in the constructor (bad values fail the JVM's
 * start with the key and the valid values). {@code SparkEnv.get()} is still null there on Spark
 * 3.5, so a start-up thread waits for it, then sets up the driver endpoint (driver) or opens the
 * transport, registers memory and registers with the driver (executors, and the driver in
 * local mode). Tasks wait for that start-up with its deadline.
 *
 * <p>Threading: thread-safe. Ownership: {@link #stop()} releases every transport, registered
 * region and file.
 */
public class SlipstreamShuffleManager extends SortShuffleManager {
  private static final Logger LOG = LoggerFactory.getLogger(SlipstreamShuffleManager.class);
  private static final String HOST_LOCAL_DISK_READS = "spark.shuffle.readHostLocalDisk";

  private final SparkConf sparkConf;
  private final SlipstreamConf conf;
  private final Transports transports;
  private final boolean isDriver;
  private final boolean localMode;
  private final CompletableFuture<Void> started = new CompletableFuture<>();
  private final StoreBlockResolver resolver;
  private final boolean fallback;
  private volatile DriverEndpoint driverEndpoint;
  private volatile ExecutorRuntime runtime;
  private volatile boolean stopped;
  private volatile Exception gpuFailure;

  public SlipstreamShuffleManager(SparkConf sparkConf) {
    super(sparkConf);
    this.sparkConf = sparkConf;
    this.transports = Transports.load(SlipstreamShuffleManager.class.getClassLoader());
    this.conf = new SlipstreamConf(SlipstreamConf.source(sparkConf), transports);
    this.isDriver = "driver".equals(sparkConf.get("spark.executor.id", ""));
    String master = sparkConf.get("spark.master", "");
    this.localMode = master.startsWith("local") && !master.startsWith("local-cluster");
    java.util.Optional<String> unsupported = conf.unsupported();
    if (unsupported.isPresent()) {
      if ("fail".equals(conf.fallback())) {
        throw new IllegalArgumentException("Slipstream cannot serve this configuration: " + unsupported.get()
            + ". Change those settings, or set " + SlipstreamConf.FALLBACK.key() + "=sort to use Spark's sort shuffle instead.");
      }
      // Every process decides the same from the same SparkConf, so driver and executors agree.
      LOG.warn("Slipstream cannot serve this configuration ({}); using Spark's sort shuffle instead. Set {}=fail to "
          + "make this a start-up failure.", unsupported.get(), SlipstreamConf.FALLBACK.key());
      this.fallback = true;
      this.resolver = null;
      started.complete(null);
      return;
    }
    this.fallback = false;
    this.resolver = new StoreBlockResolver(sparkConf, () -> runtime().node().store());
    if (!sparkConf.contains(HOST_LOCAL_DISK_READS)) {
      // Code that reads blocks through Spark's block fetcher (see the class comment) must ask the
      // holder for them: they are not files that an executor of the same host could open.
      sparkConf.set(HOST_LOCAL_DISK_READS, "false");
    }
    Thread t = new Thread(this::startUp, "slipstream-startup");
    t.setDaemon(true);
    t.start();
  }

  /**
   * Called by {@link dev.slipstream.spark.gpu.SlipstreamGpuPlugin} on an executor with the CUDA
   * device Spark assigned it, or -1 with the reason when it assigned none: once the executor's
   * runtime is up it opens that GPU and registers its GPU endpoint with the driver.
   */
  public void gpuAssigned(int ordinal, String whyNone) {
    started.whenComplete((v, e) -> {
      ExecutorRuntime r = runtime;
      if (e != null || r == null) {
        return;
      }
      try {
        if (ordinal >= 0) {
          r.gpu().attach(ordinal);
        } else {
          r.gpu().noGpuAssigned(whyNone);
        }
      } catch (Exception ex) {
        LOG.error("Slipstream GPU start-up failed on this executor", ex);
        gpuFailure = ex;
      }
    });
  }

  /** This executor's GPU once started, or an exception saying why there is none. */
  public dev.slipstream.spark.gpu.GpuExecutor requireGpu() {
    return runtimeForGpu().gpu().require();
  }

  private ExecutorRuntime runtimeForGpu() {
    awaitStarted();
    if (gpuFailure != null) {
      throw new IllegalStateException("Slipstream GPU start-up failed on this executor: " + gpuFailure.getMessage(),
          gpuFailure);
    }
    if (runtime == null) {
      throw new IllegalStateException("no Slipstream executor runtime in this process (driver outside local mode)");
    }
    return runtime;
  }

  /** True when this manager hands everything to Spark's sort shuffle (see {@link SlipstreamConf#unsupported()}). */
  public boolean isFallback() {
    return fallback;
  }

  private void startUp() {
    try {
      long deadline = System.nanoTime() + conf.registrationTimeout().toNanos();
      SparkEnv env;
      // Wait for the SparkEnv that owns this manager: after a SparkContext failed during its
      // construction, SparkEnv.get() can still return that failed context's environment.
      while ((env = SparkEnv.get()) == null || env.shuffleManager() != this) {
        if (System.nanoTime() > deadline || stopped) {
          throw new IllegalStateException("SparkEnv did not appear within " + conf.registrationTimeout().toMillis() + " ms");
        }
        Thread.sleep(5);
      }
      if (isDriver) {
        DriverEndpoint d = new DriverEndpoint(env.rpcEnv(), conf.rpcTimeout());
        env.rpcEnv().setupEndpoint(DriverEndpoint.NAME, d);
        driverEndpoint = d;
        watchExecutorRemoval(deadline);
      }
      if (!isDriver || localMode) {
        runtime = new ExecutorRuntime(env, conf, transports, localMode);
      }
      LOG.info("Slipstream started ({}, transport {}, Spark line {})", isDriver ? "driver" : "executor " + env.executorId(),
          conf.transport(), SparkShim.LINE);
      started.complete(null);
    } catch (Throwable e) {
      LOG.error("Slipstream failed to start", e);
      started.completeExceptionally(e);
    }
  }

  /** Tells the driver endpoint about removed executors, once the SparkContext exists. */
  private void watchExecutorRemoval(long deadline) {
    Thread t = new Thread(() -> {
      try {
        while (!stopped && System.nanoTime() < deadline) {
          scala.Option<SparkContext> sc = SparkContext$.MODULE$.getActive();
          if (sc.isDefined()) {
            sc.get().addSparkListener(new SparkListener() {
              @Override
              public void onExecutorRemoved(SparkListenerExecutorRemoved event) {
                driverEndpoint.executorRemoved(event.executorId(), event.reason());
              }
            });
            return;
          }
          Thread.sleep(20);
        }
        LOG.warn("No active SparkContext appeared; Slipstream will learn of lost executors only through fetch deadlines");
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }, "slipstream-listener-setup");
    t.setDaemon(true);
    t.start();
  }

  private void awaitStarted() {
    try {
      started.get(conf.registrationTimeout().toMillis() + 5000, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      throw new IllegalStateException("Slipstream could not start: " + e.getCause().getMessage(), e.getCause());
    } catch (TimeoutException e) {
      throw new IllegalStateException("Slipstream did not start within " + conf.registrationTimeout().toMillis() + " ms");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while waiting for Slipstream to start", e);
    }
  }

  private ExecutorRuntime runtime() {
    awaitStarted();
    ExecutorRuntime r = runtime;
    if (r == null) {
      throw new IllegalStateException("Slipstream has no executor runtime in this process (driver outside local mode)");
    }
    return r;
  }

  @Override
  public <K, V, C> ShuffleHandle registerShuffle(int shuffleId, ShuffleDependency<K, V, C> dependency) {
    boolean gpuShuffle = dev.slipstream.spark.gpu.GpuShuffleHandle.isGpu(dependency);
    if (fallback) {
      if (gpuShuffle) {
        throw new IllegalStateException("GPU shuffle " + shuffleId + " needs Slipstream, which is using Spark's sort"
            + " shuffle for this configuration: " + conf.unsupported().orElse("?"));
      }
      return super.registerShuffle(shuffleId, dependency);
    }
    if (gpuShuffle) {
      int n = dependency.partitioner().numPartitions();
      if (n > dev.slipstream.spark.gpu.GpuPartitioner.MAX_PARTITIONS) {
        throw new IllegalArgumentException("GPU shuffle " + shuffleId + ": " + n + " partitions, expected at most "
            + dev.slipstream.spark.gpu.GpuPartitioner.MAX_PARTITIONS + " (above it Spark's map statuses lose the block"
            + " sizes that readers reserve device memory by)");
      }
      return new dev.slipstream.spark.gpu.GpuShuffleHandle<>(shuffleId, dependency);
    }
    return new SlipstreamShuffleHandle<>(shuffleId, dependency);
  }

  @Override
  @SuppressWarnings("unchecked")
  public <K, V> ShuffleWriter<K, V> getWriter(ShuffleHandle handle, long mapId, TaskContext context,
                                              ShuffleWriteMetricsReporter metrics) {
    if (fallback) {
      return super.getWriter(handle, mapId, context, metrics);
    }
    if (handle instanceof dev.slipstream.spark.gpu.GpuShuffleHandle<?, ?, ?> g && g.deviceTables().isPresent()) {
      return new dev.slipstream.spark.gpu.DeviceTableWriter<>((dev.slipstream.spark.gpu.GpuShuffleHandle<K, V, Object>) g,
          mapId, metrics, runtime().gpu());
    }
    if (handle instanceof dev.slipstream.spark.gpu.GpuShuffleHandle<?, ?, ?> g) {
      return new dev.slipstream.spark.gpu.GpuShuffleWriter<>((dev.slipstream.spark.gpu.GpuShuffleHandle<K, V, Object>) g,
          mapId, context, metrics, runtime().gpu());
    }
    SlipstreamShuffleHandle<K, V, Object> h = (SlipstreamShuffleHandle<K, V, Object>) handle;
    ShuffleDependency<K, V, Object> dep = h.dependency();
    if (dep.partitioner().numPartitions() > conf.directPartitionsMax() && canUseSerializedShuffle(dep)) {
      return SerializedWriter.create(h, mapId, context, metrics, runtime(), sparkConf);
    }
    return new SlipstreamShuffleWriter<>(h, mapId, context, metrics, runtime(), conf.directPartitionsMax());
  }

  @Override
  @SuppressWarnings("unchecked")
  public <K, C> ShuffleReader<K, C> getReader(ShuffleHandle handle, int startMapIndex, int endMapIndex,
                                              int startPartition, int endPartition, TaskContext context,
                                              ShuffleReadMetricsReporter metrics) {
    if (fallback) {
      return super.getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
    }
    if (handle instanceof dev.slipstream.spark.gpu.GpuShuffleHandle<?, ?, ?> g && g.deviceTables().isPresent()) {
      return new dev.slipstream.spark.gpu.DeviceTableReader<>((dev.slipstream.spark.gpu.GpuShuffleHandle<K, ?, C>) g,
          startMapIndex, endMapIndex, startPartition, endPartition, context, metrics, runtime().gpu());
    }
    if (handle instanceof dev.slipstream.spark.gpu.GpuShuffleHandle<?, ?, ?> g) {
      return new dev.slipstream.spark.gpu.GpuShuffleReader<>((dev.slipstream.spark.gpu.GpuShuffleHandle<K, ?, C>) g,
          startMapIndex, endMapIndex, startPartition, endPartition, context, metrics, runtime().gpu());
    }
    return new SlipstreamShuffleReader<>((SlipstreamShuffleHandle<K, ?, C>) handle, startMapIndex, endMapIndex,
        startPartition, endPartition, context, metrics, runtime());
  }

  @Override
  public boolean unregisterShuffle(int shuffleId) {
    if (fallback) {
      return super.unregisterShuffle(shuffleId);
    }
    ExecutorRuntime r = runtime;
    if (r != null) {
      r.node().removeShuffle(shuffleId);
      r.gpu().current().ifPresent(g -> g.removeShuffle(shuffleId));
    }
    return true;
  }

  @Override
  public IndexShuffleBlockResolver shuffleBlockResolver() {
    if (fallback) {
      return super.shuffleBlockResolver();
    }
    return resolver;
  }

  @Override
  public void stop() {
    stopped = true;
    if (fallback) {
      super.stop();
      return;
    }
    ExecutorRuntime r = runtime;
    runtime = null;
    if (r != null) {
      r.close();
    }
    SparkEnv env = SparkEnv.get();
    if (driverEndpoint != null && env != null) {
      try {
        env.rpcEnv().stop(driverEndpoint.self());
      } catch (RuntimeException e) {
        LOG.debug("Stopping the driver endpoint: {}", e.toString());
      }
    }
  }

  /** The driver's peer table endpoint (driver only; waits for start-up). */
  public DriverEndpoint driverEndpoint() {
    awaitStarted();
    if (driverEndpoint == null) {
      throw new IllegalStateException("not the driver");
    }
    return driverEndpoint;
  }

  /** Slipstream counters of every registered executor, asked over RPC (driver only). */
  public Map<String, Map<String, Long>> executorMetrics() {
    return driverEndpoint().collectMetrics();
  }

  /** This process's executor counters, when it runs tasks (local mode or executors). */
  public Map<String, Long> localMetrics() {
    return runtime().metrics();
  }

  public SlipstreamConf conf() {
    return conf;
  }

  /** This process's shuffle node, for tests that check what stop() released. */
  public dev.slipstream.core.shuffle.ShuffleNode nodeForTesting() {
    return runtime().node();
  }
}
