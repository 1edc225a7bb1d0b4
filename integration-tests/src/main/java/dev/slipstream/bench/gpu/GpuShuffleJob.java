package dev.slipstream.bench.gpu;

import dev.slipstream.gpu.DeviceBuffer;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.PartitionKernel;
import dev.slipstream.gpu.shuffle.BatchLayout;
import dev.slipstream.gpu.shuffle.DeviceBatch;
import dev.slipstream.spark.SlipstreamShuffleManager;
import dev.slipstream.spark.gpu.GpuExecutor;
import dev.slipstream.spark.gpu.SlipstreamGpuShuffle;
import dev.slipstream.spark.gpu.SlipstreamGpuPlugin;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.IntStream;
import org.apache.spark.Partitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

/**
 * The end-to-end GPU shuffle job. Spark in local-cluster mode with N executors,
 * each bound to one GPU through Spark's resource scheduling (worker and executor resource
 * {@code gpu}, {@code bin/slipstream-gpu-discover} hands each worker its own GPU) and
 * {@link SlipstreamGpuPlugin}. Each map task builds a lineitem-shaped batch (key + six payload
 * columns, {@link LineitemGen}) and uploads it into one device buffer; the batches are shuffled by
 * key through the GPU path ({@link SlipstreamGpuShuffle}); each reduce task checks its device
 * batches and returns its partition's multiset checksum. The same rows go through the host path
 * (Slipstream's tcp transport, serialized rows) and the checksums must be equal partition by
 * partition.
 *
 * <p>Timing: the checked jobs copy every batch back and hash it in Java, which would dominate, so
 * each repetition runs the same shuffles with reduce tasks that only count rows, and a job that
 * only uploads the rows; generated rows are cached in each executor JVM after the checked jobs, so
 * generation is in neither. Printed per repetition: the job times and the shuffle throughput,
 * shuffled row bytes divided by (shuffle job time minus upload-only job time). The extra Spark stage
 * of a shuffle job (scheduling, task launch: tens of ms) is inside that time. Besides that
 * end-to-end figure, the timed GPU shuffle's reduce tasks report their data path as measured inside
 * them ({@link DataPathReport}: remote bytes over the span from the first request sent to the last
 * block landed, per reducer and aggregated). Each shuffle's map outputs are freed as soon as its
 * job ends, so repetitions do not fill the executors' map-output stores.
 *
 * <p>Usage: {@code GpuShuffleJob [--executors 2] [--maps 8] [--rows 2000000] [--partitions 16]
 * [--reps 3] [--warmup 0] [--tasks-per-gpu 1] [--host-timed true|false]
 * [--conf spark.k=v,...] [--lose-executor false] [--discover PATH]}; {@code --warmup W} runs W GPU
 * shuffles of the same data before the timed repetitions and reports only their total time (the
 * serving path of a long-running executor is compiled by the JIT's last tier; a fresh one's is not
 * for the first few hundred requests: docs/benchmarks/2026-11-30-gpu-shuffle-job.md); {@code --host-timed false} leaves
 * out the timed host shuffle (the checked one still runs); {@code --conf} adds Spark settings;
 * {@code --lose-executor true} ends with a GPU shuffle during whose reduce stage one executor halts
 * (the job must recover with the host path's checksums); executors get 12g
 * of heap; needs
 * -Dslipstream.plugin.jar (the executors' class path).
 */
public final class GpuShuffleJob {
  private GpuShuffleJob() {}

  public static void main(String[] args) throws Exception {
    Map<String, String> o = new TreeMap<>(Map.of("executors", "2", "maps", "8", "rows", "2000000",
        "partitions", "16", "reps", "3", "discover", "bin/slipstream-gpu-discover", "seed", "7",
        "tasks-per-gpu", "1"));
    o.put("warmup", "0");
    o.put("host-timed", "true");
    o.put("conf", "");
    o.put("lose-executor", "false");
    for (int i = 0; i + 1 < args.length; i += 2) {
      if (!args[i].startsWith("--") || !o.containsKey(args[i].substring(2))) {
        throw new IllegalArgumentException("unknown option " + args[i] + ", expected one of --" + o.keySet());
      }
      o.put(args[i].substring(2), args[i + 1]);
    }
    int executors = Integer.parseInt(o.get("executors"));
    int maps = Integer.parseInt(o.get("maps"));
    int rows = Integer.parseInt(o.get("rows"));
    int parts = Integer.parseInt(o.get("partitions"));
    int reps = Integer.parseInt(o.get("reps"));
    int warmup = Integer.parseInt(o.get("warmup"));
    if (warmup < 0) {
      throw new IllegalArgumentException("--warmup " + warmup + ", expected >= 0 untimed GPU shuffles");
    }
    long seed = Long.parseLong(o.get("seed"));
    int tasksPerGpu = Integer.parseInt(o.get("tasks-per-gpu"));
    if (tasksPerGpu < 1 || tasksPerGpu > 16) {
      throw new IllegalArgumentException("--tasks-per-gpu " + tasksPerGpu + ", expected 1..16 (concurrent tasks of an"
          + " executor sharing its GPU)");
    }
    String discover = new java.io.File(o.get("discover")).getAbsolutePath();
    // (Not LocalCluster.executorClassPath(): that class links Spark SQL, which the GPU machine's stage leaves out.)
    String jar = System.getProperty("slipstream.plugin.jar");
    if (jar == null || !new java.io.File(jar).isFile()) {
      throw new IllegalStateException("plugin jar not found at " + jar + " (set -Dslipstream.plugin.jar)");
    }
    String app = System.getProperty("slipstream.app.classpath", "");
    String cp = app.isEmpty() ? jar : jar + java.io.File.pathSeparator + app;
    SparkConf conf = new SparkConf().setAppName("slipstream-gpu-shuffle")
        .setMaster("local-cluster[" + executors + "," + tasksPerGpu + ",16384]")
        .set("spark.executor.memory", "12g")
        .set("spark.executor.extraClassPath", cp)
        .set("spark.driver.extraClassPath", cp)
        .set("spark.shuffle.manager", SlipstreamShuffleManager.class.getName())
        .set("spark.slipstream.transport", "tcp")
        .set("spark.plugins", SlipstreamGpuPlugin.class.getName())
        .set("spark.slipstream.gpu.mode", "require")
        .set("spark.slipstream.gpu.landing.bytes", "2g")
        .set("spark.slipstream.gpu.mapOutput.memoryBytes", "8g")
        .set("spark.worker.resource.gpu.amount", "1")
        .set("spark.worker.resource.gpu.discoveryScript", discover)
        .set("spark.executor.resource.gpu.amount", "1")
        .set("spark.executor.resource.gpu.discoveryScript", discover)
        .set("spark.task.resource.gpu.amount", tasksPerGpu == 1 ? "1" : String.valueOf(1.0 / tasksPerGpu))
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.locality.wait", "0s");
    for (String kv : o.get("conf").split(",")) {
      if (kv.isBlank()) {
        continue;
      }
      int eq = kv.indexOf('=');
      if (eq <= 0 || !kv.startsWith("spark.")) {
        throw new IllegalArgumentException("--conf: got '" + kv + "', expected spark.key=value[,spark.key=value...]");
      }
      conf.set(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
    }
    if (!o.get("host-timed").equals("true") && !o.get("host-timed").equals("false")) {
      throw new IllegalArgumentException("--host-timed: got '" + o.get("host-timed") + "', expected true or false");
    }
    boolean hostTimed = Boolean.parseBoolean(o.get("host-timed"));
    if (!o.get("lose-executor").equals("true") && !o.get("lose-executor").equals("false")) {
      throw new IllegalArgumentException("--lose-executor: got '" + o.get("lose-executor") + "', expected true or false");
    }
    boolean loseExecutor = Boolean.parseBoolean(o.get("lose-executor"));
    if (loseExecutor && executors < 2) {
      throw new IllegalArgumentException("--lose-executor true needs --executors 2 or more, got " + executors);
    }
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      long deadline = System.nanoTime() + 180_000_000_000L;
      while (sc.sc().statusTracker().getExecutorInfos().length < executors + 1) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException(executors + " executors did not register within 180 s");
        }
        Thread.sleep(100);
      }
      var driver = ((SlipstreamShuffleManager) SparkEnv.get().shuffleManager()).driverEndpoint();
      long waitGpu = System.nanoTime() + 60_000_000_000L;
      while (driver.peers().values().stream().filter(p -> p.gpu().isPresent()).count() < executors) {
        if (System.nanoTime() > waitGpu) {
          throw new IllegalStateException("executors with a GPU endpoint: " + driver.peers().values().stream()
              .filter(p -> p.gpu().isPresent()).count() + " of " + executors + " after 60 s: " + driver.peers());
        }
        Thread.sleep(100);
      }
      driver.peers().values().forEach(p -> System.out.println("executor " + p.executorId() + ": GPU "
          + p.gpu().get().device() + " " + p.gpu().get().pciBusId() + " " + p.gpu().get().uuid()));
      List<String> ids = new ArrayList<>(driver.peers().keySet());
      if (ids.size() >= 2) {
        var gconf = new dev.slipstream.spark.gpu.GpuConf(dev.slipstream.spark.SlipstreamConf.source(conf));
        String key = dev.slipstream.spark.gpu.GpuConf.PATH.key();
        var a = driver.peers().get(ids.get(0)).gpu().orElse(null);
        var b = driver.peers().get(ids.get(1)).gpu().orElse(null);
        var path = dev.slipstream.gpu.shuffle.GpuPath.between(a, b, gconf.gpunetio());
        System.out.println("path " + ids.get(0) + " -> " + ids.get(1) + ": " + path
            + (gconf.stagedOnly() ? " (read over the staging path: " + key + "=staged)" : "")
            + (gconf.gpunetio() && path == dev.slipstream.gpu.shuffle.GpuPath.NVLINK
                ? " (pushed as DOCA GPUNetIO RDMA writes to the software NIC's own queue pairs: " + key + "=gpunetio)"
                : "")
            + (path == dev.slipstream.gpu.shuffle.GpuPath.GPUNETIO ? " (DOCA GPUNetIO RDMA writes over the NIC link; NIC "
                + gconf.nic() + ")" : ""));
      }
      long bytes = (long) maps * rows * LineitemGen.ROW_BYTES;
      System.out.printf("%d maps x %d rows (%d B/row) = %.1f MB into %d partitions, %d executors, %d task(s) at once"
          + " per GPU%n", maps, rows, LineitemGen.ROW_BYTES, bytes / 1e6, parts, executors, tasksPerGpu);
      JavaRDD<Integer> mapIds = sc.parallelize(IntStream.range(0, maps).boxed().toList(), maps);
      // Checked (once): both paths, per-partition multiset checksums compared.
      long t0 = System.nanoTime();
      JavaRDD<LineitemGen.Checksum> gpuSums = gpuPath(mapIds, seed, rows, parts);
      Map<Integer, LineitemGen.Checksum> gpu = collect(gpuSums);
      long t1 = System.nanoTime();
      JavaRDD<LineitemGen.Checksum> hostSums = hostPath(mapIds, seed, rows, parts);
      Map<Integer, LineitemGen.Checksum> host = collect(hostSums);
      long t2 = System.nanoTime();
      cleanShuffles(sc, gpuSums.rdd());
      cleanShuffles(sc, hostSums.rdd());
      if (!gpu.equals(host)) {
        throw new IllegalStateException("GPU and host paths disagree: GPU " + gpu + " host " + host);
      }
      long total = gpu.values().stream().mapToLong(LineitemGen.Checksum::rows).sum();
      if (total != (long) maps * rows) {
        throw new IllegalStateException("rows: " + total + ", expected " + (long) maps * rows);
      }
      System.out.printf("checked: checksums of %d partitions equal (%d rows); GPU path %.3f s, host path %.3f s"
          + " (both with generation, copy back and hashing)%n", gpu.size(), total, (t1 - t0) / 1e9, (t2 - t1) / 1e9);
      // Every executor caches every map's rows (tasks land on either executor), then timed:
      // shuffles whose reduce tasks only count rows, against a job that only uploads the cached
      // rows; the host path once (it is slow).
      int fill = 4 * executors;
      sc.parallelize(IntStream.range(0, fill).boxed().toList(), fill).foreach(i -> {
        for (int m = 0; m < maps; m++) {
          JobRows.rows(seed, m, rows);
        }
      });
      if (warmup > 0) {
        long w0 = System.nanoTime();
        for (int w = 0; w < warmup; w++) {
          JavaRDD<DataPathReport.Read> shuffled = countedShuffle(mapIds, seed, rows, parts);
          long n = shuffled.collect().stream().mapToLong(DataPathReport.Read::rows).sum();
          cleanShuffles(sc, shuffled.rdd());
          if (n != total) {
            throw new IllegalStateException("warm-up shuffle " + (w + 1) + ": " + n + " rows, expected " + total);
          }
        }
        System.out.printf("warm-up: %d GPU shuffles (untimed) in %.1f s%n", warmup, (System.nanoTime() - w0) / 1e9);
      }
      for (int rep = 1; rep <= reps; rep++) {
        long t3 = System.nanoTime();
        long base = baseline(mapIds, seed, rows);
        long t4 = System.nanoTime();
        JavaRDD<DataPathReport.Read> timed = countedShuffle(mapIds, seed, rows, parts);
        List<DataPathReport.Read> reads = timed.collect();
        long t5 = System.nanoTime();
        cleanShuffles(sc, timed.rdd());
        long gpuRows = reads.stream().mapToLong(DataPathReport.Read::rows).sum();
        long hostRows = total;
        long t6 = t5;
        if (rep == 1 && hostTimed) {
          JavaPairRDD<Long, byte[]> hostShuffled = hostRecords(mapIds, seed, rows).partitionBy(new KeyPartitioner(parts));
          hostRows = hostShuffled.count();
          t6 = System.nanoTime();
          cleanShuffles(sc, hostShuffled.rdd());
        }
        if (base != total || gpuRows != total || hostRows != total) {
          throw new IllegalStateException("rows: uploaded " + base + ", GPU " + gpuRows + ", host " + hostRows
              + ", expected " + total);
        }
        double baseS = (t4 - t3) / 1e9;
        double gpuS = (t5 - t4) / 1e9;
        double hostS = (t6 - t5) / 1e9;
        System.out.printf("rep %d: upload-only job %.3f s, GPU shuffle job %.3f s (throughput %s)%s%n", rep, baseS,
            gpuS, throughput(bytes, gpuS - baseS), rep == 1 && hostTimed
                ? String.format(", host shuffle job %.3f s (throughput %s)", hostS, throughput(bytes, hostS - baseS))
                : "");
        if (rep == 1) {
          System.out.println(DataPathReport.METHOD);
        }
        DataPathReport.lines(reads).forEach(System.out::println);
      }
      // How each executor served: requests pushed over NIC links and the lanes made for them.
      driver.collectMetrics().forEach((id, m) -> System.out.println("executor " + id + " served: "
          + m.getOrDefault("gpu.requestsServed", 0L) + " device write requests, " + m.getOrDefault("gpu.nicRequests", 0L)
          + " of them over NIC links (" + m.getOrDefault("gpu.nicLinks", 0L) + " links connected, "
          + m.getOrDefault("gpu.nicLanes", 0L) + " push lanes over them); resident server: "
          + m.getOrDefault("gpu.residentServed", 0L) + " served, " + m.getOrDefault("gpu.residentRefused", 0L)
          + " refused, " + m.getOrDefault("gpu.residentBytes", 0L) + " bytes; as a reader: "
          + m.getOrDefault("gpu.residentPosted", 0L) + " posted, " + m.getOrDefault("gpu.residentFallbacks", 0L)
          + " sent again the host-driven way"));
      if (loseExecutor) {
        loseExecutorDuringReduce(sc, mapIds, seed, rows, parts, ids.get(ids.size() - 1), host);
      }
    }
  }

  /** The GPU shuffle by key whose reduce tasks only count their rows and report their reads. */
  private static JavaRDD<DataPathReport.Read> countedShuffle(JavaRDD<Integer> mapIds, long seed, int rows, int parts) {
    return SlipstreamGpuShuffle.shuffleByKey(batches(mapIds, seed, rows), parts, LineitemGen.WIDTHS)
        .mapPartitions(it -> {
          long n = 0;
          while (it.hasNext()) {
            n += it.next().rows();
          }
          return List.of(DataPathReport.Read.of(TaskContext.getPartitionId(), SparkEnv.get().executorId(), n,
              SlipstreamGpuShuffle.taskReadStats())).iterator();
        });
  }

  /**
   * A holder lost in the middle of a GPU shuffle's reduce stage: the first reduce task that runs on
   * executor {@code victim} halts its JVM right after its read, while the other executors' reduce
   * tasks still read from it. Spark must recover (the reads of the lost holder's blocks fail with a
   * FetchFailedException, or their map outputs are already unregistered; the lost maps run again)
   * and the result must equal the host path's checksums. Prints the task failures seen, by reason.
   */
  private static void loseExecutorDuringReduce(JavaSparkContext sc, JavaRDD<Integer> mapIds, long seed, int rows,
      int parts, String victim, Map<Integer, LineitemGen.Checksum> host) throws java.io.IOException {
    java.util.Map<String, Integer> failures = new java.util.concurrent.ConcurrentSkipListMap<>();
    sc.sc().addSparkListener(new org.apache.spark.scheduler.SparkListener() {
      @Override
      public void onTaskEnd(org.apache.spark.scheduler.SparkListenerTaskEnd end) {
        if (!(end.reason() instanceof org.apache.spark.Success$)) {
          failures.merge("stage " + end.stageId() + " " + end.reason().getClass().getSimpleName(), 1, Integer::sum);
        }
      }
    });
    java.nio.file.Path marker = java.nio.file.Files.createTempDirectory("slipstream-lose-executor").resolve("halted");
    String markerPath = marker.toString();
    long t0 = System.nanoTime();
    JavaRDD<LineitemGen.Checksum> sums = SlipstreamGpuShuffle.shuffleByKey(batches(mapIds, seed, rows), parts,
        LineitemGen.WIDTHS).mapPartitions(it -> {
          int p = TaskContext.getPartitionId();
          GpuContext ctx = gpu().context();
          LineitemGen.Checksum sum = new LineitemGen.Checksum(p, 0, 0, 0);
          while (it.hasNext()) {
            sum = sum.plus(checksum(ctx, it.next(), p, parts));
          }
          // Executors share this machine, so the marker file lets exactly one task halt its JVM.
          if (SparkEnv.get().executorId().equals(victim) && new java.io.File(markerPath).createNewFile()) {
            System.err.println("slipstream lose-executor: executor " + victim + " halts in reduce task " + p);
            Runtime.getRuntime().halt(17);
          }
          return List.of(sum).iterator();
        });
    Map<Integer, LineitemGen.Checksum> got = collect(sums);
    double s = (System.nanoTime() - t0) / 1e9;
    if (!java.nio.file.Files.exists(marker)) {
      throw new IllegalStateException("lose-executor: no reduce task ran on executor " + victim + "; nothing was lost");
    }
    if (!got.equals(host)) {
      throw new IllegalStateException("lose-executor: after losing executor " + victim + " the GPU path gives " + got
          + ", the host path " + host);
    }
    System.out.printf("lose-executor: executor %s halted during the reduce stage; the job recovered in %.3f s with"
        + " checksums of %d partitions equal to the host path's; failed tasks by stage and reason: %s%n", victim, s,
        got.size(), failures);
  }

  /**
   * Frees the map outputs of every shuffle {@code rdd} depends on, now and waiting for the executors
   * (Spark's ContextCleaner frees them only once the driver's GC has collected the shuffle's
   * dependency, which a driver that allocates little may not do for many repetitions: the device
   * map-output store then fills, and a map task fails naming its budgets).
   */
  private static void cleanShuffles(JavaSparkContext sc, org.apache.spark.rdd.RDD<?> rdd) {
    java.util.Set<Integer> ids = new java.util.TreeSet<>();
    shuffleIds(rdd, ids);
    ids.forEach(id -> sc.sc().cleaner().get().doCleanupShuffle(id, true));
  }

  private static void shuffleIds(org.apache.spark.rdd.RDD<?> rdd, java.util.Set<Integer> out) {
    scala.collection.Iterator<org.apache.spark.Dependency<?>> it = rdd.dependencies().iterator();
    while (it.hasNext()) {
      org.apache.spark.Dependency<?> d = it.next();
      if (d instanceof org.apache.spark.ShuffleDependency<?, ?, ?> sd) {
        out.add(sd.shuffleId());
      }
      shuffleIds(d.rdd(), out);
    }
  }

  /** Bytes over the time a shuffle job took beyond the upload-only job, or why there is no figure. */
  private static String throughput(long bytes, double seconds) {
    return seconds <= 0.005 ? "n/a: within 5 ms of the upload-only job"
        : String.format("%.2f GB/s = %d B / %.3f s beyond the upload-only job", bytes / seconds / 1e9, bytes, seconds);
  }

  private static Map<Integer, LineitemGen.Checksum> collect(JavaRDD<LineitemGen.Checksum> sums) {
    Map<Integer, LineitemGen.Checksum> m = new TreeMap<>();
    for (LineitemGen.Checksum c : sums.collect()) {
      m.merge(c.partition(), c, LineitemGen.Checksum::plus);
    }
    return m;
  }

  /** Uploading the cached rows alone (and a row count), the baseline both paths are measured against. */
  private static long baseline(JavaRDD<Integer> mapIds, long seed, int rows) {
    return mapIds.map(m -> {
      JobRows.Rows r = JobRows.rows(seed, m, rows);
      GpuExecutor g = gpu();
      try (DeviceBuffer d = g.context().allocate(BatchLayout.packed(rows, LineitemGen.WIDTHS).bufferBytes())) {
        d.write(0, r.packed());
      }
      return (long) rows;
    }).reduce(Long::sum);
  }

  private static GpuExecutor gpu() {
    return ((SlipstreamShuffleManager) SparkEnv.get().shuffleManager()).requireGpu();
  }

  /** Each map task's rows as one device batch on its executor's GPU. */
  private static JavaRDD<DeviceBatch> batches(JavaRDD<Integer> mapIds, long seed, int rows) {
    return mapIds.map(m -> {
      JobRows.Rows r = JobRows.rows(seed, m, rows);
      GpuContext ctx = gpu().context();
      BatchLayout l = BatchLayout.packed(rows, LineitemGen.WIDTHS);
      DeviceBuffer d = ctx.allocate(l.bufferBytes());
      d.write(0, r.packed());
      return DeviceBatch.owning(ctx.device(), d.address(), l, d);
    });
  }

  private static JavaRDD<LineitemGen.Checksum> gpuPath(JavaRDD<Integer> mapIds, long seed, int rows, int parts) {
    return SlipstreamGpuShuffle.shuffleByKey(batches(mapIds, seed, rows), parts, LineitemGen.WIDTHS).mapPartitions(it -> {
      int p = TaskContext.getPartitionId();
      GpuContext ctx = gpu().context();
      LineitemGen.Checksum sum = new LineitemGen.Checksum(p, 0, 0, 0);
      while (it.hasNext()) {
        DeviceBatch b = it.next();
        sum = sum.plus(checksum(ctx, b, p, parts));
      }
      return List.of(sum).iterator();
    });
  }

  /** Copies a device batch back and hashes its rows, checking each key belongs to partition {@code p}. */
  static LineitemGen.Checksum checksum(GpuContext ctx, DeviceBatch b, int p, int parts) {
    byte[] raw = new byte[(int) b.layout().bufferBytes()];
    ctx.copyToHost(b.address(), raw, 0, raw.length);
    return JobRows.checksum(raw, b.layout(), p, parts);
  }

  /** The same rows as host records (key, 36 payload bytes) through Slipstream's host path. */
  private static JavaRDD<LineitemGen.Checksum> hostPath(JavaRDD<Integer> mapIds, long seed, int rows, int parts) {
    return hostRecords(mapIds, seed, rows).partitionBy(new KeyPartitioner(parts)).mapPartitions(it -> {
      int p = TaskContext.getPartitionId();
      return List.of(JobRows.hostChecksum(it, p)).iterator();
    });
  }

  /** The generated rows as host records (key, 36 payload bytes). */
  private static JavaPairRDD<Long, byte[]> hostRecords(JavaRDD<Integer> mapIds, long seed, int rows) {
    return mapIds.flatMapToPair(m -> {
      JobRows.Rows cached = JobRows.rows(seed, m, rows);
      long[] keys = cached.keys();
      byte[] payload = cached.payload();
      return new Iterator<Tuple2<Long, byte[]>>() {
        int i;

        @Override
        public boolean hasNext() {
          return i < rows;
        }

        @Override
        public Tuple2<Long, byte[]> next() {
          byte[] r = java.util.Arrays.copyOfRange(payload, i * LineitemGen.PAYLOAD_BYTES,
              (i + 1) * LineitemGen.PAYLOAD_BYTES);
          return new Tuple2<>(keys[i++], r);
        }
      };
    });
  }

  /** The GPU partition function on the host, so both paths put each row in the same partition. */
  static final class KeyPartitioner extends Partitioner {
    private static final long serialVersionUID = 1L;
    private final int parts;

    KeyPartitioner(int parts) {
      this.parts = parts;
    }

    @Override
    public int numPartitions() {
      return parts;
    }

    @Override
    public int getPartition(Object key) {
      return PartitionKernel.partitionOf((Long) key, parts);
    }
  }
}
