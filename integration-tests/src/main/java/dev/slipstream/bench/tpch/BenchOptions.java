package dev.slipstream.bench.tpch;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Command-line options of the TPC-H runner. Defaults are the README's first command: a scale
 * factor that finishes in a few minutes on a 2-core machine with 2 executors of 1 core.
 *
 * @param scaleFactor TPC-H scale factor (1 = 6 M lineitem rows)
 * @param queries query names, {@code q01}..{@code q22}
 * @param executors executor JVMs of the local cluster
 * @param cores cores per executor
 * @param executorMemory executor heap, e.g. {@code 1g}
 * @param warmups rounds run first and excluded from the results
 * @param reps measured rounds
 * @param transports Slipstream transports to run next to sort shuffle (empty: sort only)
 * @param shufflePartitions {@code spark.sql.shuffle.partitions}
 * @param dataDir where generated Parquet data is kept between runs
 * @param outDir where the JSON, markdown and PNG go
 * @param jfrDir when set, executors record JFR profiles there (one folder per manager)
 * @param rapidsJar when set, the GPU mode: the RAPIDS Accelerator jar the queries run with
 * @param rapidsNatives in the GPU mode, a folder of cudf's native libraries to load in place of
 *     those inside the jar (null: the jar's)
 * @param gpuAllocFraction in the GPU mode, each executor's share of GPU memory for RAPIDS' pool
 * @param confs further {@code key=value} Spark settings for every benchmark cluster
 * @param rapidsGpuJar in the GPU mode, Slipstream's RAPIDS integration jar ({@code slipstream-rapids-gpu}):
 *     when set, RAPIDS also runs on Slipstream's GPU path ({@link #RAPIDS_SLIPSTREAM_GPU}); null: not
 * @param gpuCompressions with {@code rapidsGpuJar}, the values of {@code spark.slipstream.rapids.compression}
 *     the GPU path runs with, one manager each ({@link #gpuManager}); {@code [none]} by default
 */
public record BenchOptions(double scaleFactor, List<String> queries, int executors, int cores, String executorMemory,
    int warmups, int reps, List<String> transports, int shufflePartitions, Path dataDir, Path outDir, Path jfrDir,
    Path rapidsJar, Path rapidsNatives, double gpuAllocFraction, List<String> confs, Path rapidsGpuJar,
    List<String> gpuCompressions) {

  /** The GPU mode's managers: RAPIDS with its own shuffle manager (Spark 4: set by RAPIDS itself). */
  public static final String RAPIDS_DEFAULT = "rapids-default";
  /** The GPU mode's prefix of RAPIDS on Slipstream's manager, followed by the transport. */
  public static final String RAPIDS_SLIPSTREAM = "rapids-slipstream-";
  /** The GPU mode's RAPIDS on Slipstream's GPU path: shuffles stay in GPU memory (control over tcp). */
  public static final String RAPIDS_SLIPSTREAM_GPU = "rapids-slipstream-gpu";
  /** The values of {@code spark.slipstream.rapids.compression} that {@code --gpu-compression} takes. */
  public static final List<String> GPU_COMPRESSIONS = List.of("none", "lz4");

  public static final String USAGE = """
      Usage: slipstream-bench [options]
        --sf X                TPC-H scale factor (default 0.1)
        --queries LIST        e.g. 1,3,18 or q01,q03 (default: all 22)
        --executors N         executor JVMs (default 2)
        --cores N             cores per executor (default 1)
        --executor-memory M   heap per executor (default 1g)
        --reps N              measured repetitions (default 2)
        --warmups N           warm-up rounds, excluded (default 1)
        --transports LIST     Slipstream transports to compare with sort, or 'none' (default tcp)
        --shuffle-partitions N  spark.sql.shuffle.partitions (default 200, Spark's default)
        --data DIR            generated data and CPU Spark's rows (DIR/reference), reused
                              across runs (default data/tpch)
        --out DIR             report folder (default bench-out/tpch)
        --jfr DIR             record a JFR profile (settings=default) of every executor into DIR/<manager>/
        --conf KEY=VALUE      a further Spark setting for every benchmark cluster (repeatable)
      GPU mode (Spark 4 line, a GPU on this machine):
        --rapids JAR          run the queries with the RAPIDS Accelerator from JAR: CPU Spark once for
                              the reference rows, then rapids-default (RAPIDS' own shuffle manager) and
                              rapids-slipstream-<transport> per transport
        --rapids-natives DIR  cudf's native libraries from DIR instead of from the jar
        --rapids-gpu JAR      also run rapids-slipstream-gpu: RAPIDS' shuffles on Slipstream's GPU path,
                              with Slipstream's RAPIDS integration from JAR (slipstream-rapids-gpu)
        --gpu-compression LIST  the GPU path's spark.slipstream.rapids.compression values, one manager
                              each: none (rapids-slipstream-gpu), lz4 (rapids-slipstream-gpu-lz4);
                              default none
        --gpu-alloc-fraction F  each executor's share of GPU memory for RAPIDS' pool
                              (default 0.8 / executors, at most 0.4)
      """;

  public static BenchOptions defaults() {
    return new BenchOptions(0.1, allQueries(), 2, 1, "1g", 1, 2, List.of("tcp"), 200, Path.of("data/tpch"),
        Path.of("bench-out/tpch"), null, null, null, Double.NaN, List.of(), null, List.of("none"));
  }

  public static List<String> allQueries() {
    List<String> q = new ArrayList<>();
    for (int i = 1; i <= 22; i++) {
      q.add(name(i));
    }
    return q;
  }

  static String name(int i) {
    return String.format(Locale.ROOT, "q%02d", i);
  }

  public static BenchOptions parse(String[] args) {
    BenchOptions d = defaults();
    double sf = d.scaleFactor;
    List<String> queries = d.queries;
    int executors = d.executors;
    int cores = d.cores;
    String memory = d.executorMemory;
    int warmups = d.warmups;
    int reps = d.reps;
    List<String> transports = d.transports;
    int partitions = d.shufflePartitions;
    Path data = d.dataDir;
    Path out = d.outDir;
    Path jfr = d.jfrDir;
    Path rapids = null;
    Path natives = null;
    Path rapidsGpu = null;
    double fraction = Double.NaN;
    List<String> compressions = null;
    List<String> confs = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.equals("-h") || a.equals("--help")) {
        throw new IllegalArgumentException("");
      }
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException("option " + a + " needs a value");
      }
      String v = args[++i];
      switch (a) {
        case "--sf", "--scale-factor" -> sf = positive(a, number(a, v));
        case "--queries" -> queries = queries(v);
        case "--executors" -> executors = (int) positive(a, integer(a, v));
        case "--cores" -> cores = (int) positive(a, integer(a, v));
        case "--executor-memory" -> memory = v;
        case "--reps" -> reps = (int) positive(a, integer(a, v));
        case "--warmups" -> warmups = Math.max(0, integer(a, v));
        case "--transports" -> transports = v.equals("none") ? List.of() : List.of(v.split(","));
        case "--shuffle-partitions" -> partitions = (int) positive(a, integer(a, v));
        case "--data" -> data = Path.of(v);
        case "--out" -> out = Path.of(v);
        case "--jfr" -> jfr = Path.of(v);
        case "--conf" -> {
          int eq = v.indexOf('=');
          if (eq <= 0) {
            throw new IllegalArgumentException("--conf: got '" + v + "', expected KEY=VALUE");
          }
          confs.add(v);
        }
        case "--rapids" -> rapids = Path.of(v);
        case "--rapids-natives" -> natives = Path.of(v);
        case "--rapids-gpu" -> rapidsGpu = Path.of(v);
        case "--gpu-compression" -> compressions = compressions(v);
        case "--gpu-alloc-fraction" -> {
          fraction = number(a, v);
          if (!(fraction > 0 && fraction <= 1)) {
            throw new IllegalArgumentException(a + ": got " + v + ", expected a fraction above 0 and at most 1");
          }
        }
        default -> throw new IllegalArgumentException("unknown option " + a);
      }
    }
    if (rapids == null && (natives != null || rapidsGpu != null || !Double.isNaN(fraction))) {
      throw new IllegalArgumentException("--rapids-natives, --rapids-gpu and --gpu-alloc-fraction need --rapids JAR"
          + " (the GPU mode)");
    }
    if (compressions != null && rapidsGpu == null) {
      throw new IllegalArgumentException("--gpu-compression needs --rapids-gpu JAR (the GPU path)");
    }
    if (rapids != null && Double.isNaN(fraction)) {
      fraction = Math.min(0.4, 0.8 / executors);
    }
    return new BenchOptions(sf, queries, executors, cores, memory, warmups, reps, transports, partitions, data, out,
        jfr, rapids, natives, fraction, List.copyOf(confs), rapidsGpu, compressions == null ? d.gpuCompressions
        : compressions);
  }

  private static List<String> compressions(String v) {
    List<String> out = new ArrayList<>();
    for (String s : v.split(",")) {
      String c = s.trim().toLowerCase(Locale.ROOT);
      if (!GPU_COMPRESSIONS.contains(c)) {
        throw new IllegalArgumentException("--gpu-compression: got '" + s + "', expected a list of " + GPU_COMPRESSIONS);
      }
      if (out.contains(c)) {
        throw new IllegalArgumentException("--gpu-compression: " + c + " given twice");
      }
      out.add(c);
    }
    return List.copyOf(out);
  }

  private static double number(String option, String v) {
    try {
      return Double.parseDouble(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(option + ": got '" + v + "', expected a number");
    }
  }

  private static int integer(String option, String v) {
    try {
      return Integer.parseInt(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(option + ": got '" + v + "', expected a whole number");
    }
  }

  private static double positive(String option, double v) {
    if (!(v > 0)) {
      throw new IllegalArgumentException(option + ": got " + v + ", expected a number above 0");
    }
    return v;
  }

  private static List<String> queries(String v) {
    List<String> out = new ArrayList<>();
    for (String s : v.split(",")) {
      String t = s.trim().toLowerCase(Locale.ROOT);
      int n;
      try {
        n = Integer.parseInt(t.startsWith("q") ? t.substring(1) : t);
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("--queries: got '" + s + "', expected numbers 1..22 or q01..q22");
      }
      if (n < 1 || n > 22) {
        throw new IllegalArgumentException("--queries: got " + s + ", expected 1..22");
      }
      out.add(name(n));
    }
    return out;
  }

  /** The GPU mode: the queries run with the RAPIDS Accelerator. */
  public boolean gpu() {
    return rapidsJar != null;
  }

  /**
   * Shuffle managers in run order: {@code sort}, then {@code slipstream-<transport>} per transport;
   * in the GPU mode {@code sort} (CPU Spark, first round only: the reference rows), {@code
   * rapids-default}, then {@code rapids-slipstream-<transport>} per transport, then {@code
   * rapids-slipstream-gpu} when {@link #rapidsGpuJar} is set.
   */
  public List<String> managers() {
    List<String> m = new ArrayList<>();
    m.add("sort");
    if (gpu()) {
      m.add(RAPIDS_DEFAULT);
      transports.forEach(t -> m.add(RAPIDS_SLIPSTREAM + t));
      if (rapidsGpuJar != null) {
        gpuCompressions.forEach(c -> m.add(gpuManager(c)));
      }
    } else {
      transports.forEach(t -> m.add("slipstream-" + t));
    }
    return m;
  }

  /** The manager the others are compared with: sort, or in the GPU mode RAPIDS' own. */
  public String baseline() {
    return gpu() ? RAPIDS_DEFAULT : "sort";
  }

  /** The managers compared with {@link #baseline()}, in run order. */
  public List<String> compared() {
    List<String> m = new ArrayList<>(managers());
    m.remove("sort");
    m.remove(baseline());
    return m;
  }

  /** Whether {@code manager} runs in {@code round}: in the GPU mode CPU Spark runs in the first round only. */
  public boolean runs(String manager, int round) {
    return !(gpu() && manager.equals("sort") && round > 0);
  }

  /** Slipstream is the shuffle manager of {@code manager}. */
  public static boolean slipstream(String manager) {
    return manager.startsWith("slipstream-") || manager.startsWith(RAPIDS_SLIPSTREAM);
  }

  /** The GPU path's manager with compression {@code compression}: {@code none} has no suffix. */
  public static String gpuManager(String compression) {
    return compression.equals("none") ? RAPIDS_SLIPSTREAM_GPU : RAPIDS_SLIPSTREAM_GPU + "-" + compression;
  }

  /** RAPIDS' shuffles on Slipstream's GPU path under {@code manager}, with any compression. */
  public static boolean gpuPath(String manager) {
    return manager.equals(RAPIDS_SLIPSTREAM_GPU) || manager.startsWith(RAPIDS_SLIPSTREAM_GPU + "-");
  }

  /** The value of {@code spark.slipstream.rapids.compression} under a {@link #gpuPath} manager. */
  public static String gpuCompression(String manager) {
    return manager.equals(RAPIDS_SLIPSTREAM_GPU) ? "none" : manager.substring(RAPIDS_SLIPSTREAM_GPU.length() + 1);
  }

  /** The transport of a Slipstream manager (the GPU path's control messages go over tcp). */
  public static String transport(String manager) {
    if (gpuPath(manager)) {
      return "tcp";
    }
    return manager.substring(manager.lastIndexOf('-') + 1);
  }

  /** Executor memory in MiB, for the local cluster's worker size. */
  int executorMemoryMb() {
    String s = executorMemory.trim().toLowerCase(Locale.ROOT);
    long mult = s.endsWith("g") ? 1024 : 1;
    String digits = s.replaceAll("[gm]$", "");
    return (int) (Long.parseLong(digits) * mult);
  }
}
