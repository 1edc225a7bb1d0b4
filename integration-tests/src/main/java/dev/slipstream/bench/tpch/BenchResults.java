package dev.slipstream.bench.tpch;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.ToLongFunction;
import java.util.stream.Collectors;

/**
 * Every query run of a benchmark and the statistics the reports show: per query and manager the
 * median wall time with its min and max over the measured rounds, the median of each metric, the
 * ratio to the baseline manager (sort, or in the GPU mode RAPIDS' own), and which queries are
 * shuffle-heavy (under CPU Spark's sort shuffle the shuffle bytes written are above {@link
 * #HEAVY_FRACTION} of the bytes its scans read).
 *
 * <p>Threading: filled by the runner's thread, read after the run.
 */
public final class BenchResults {
  public static final double HEAVY_FRACTION = 0.10;
  /** The target: total time over shuffle-heavy queries at most this fraction of the baseline's (1.3x). */
  public static final double TARGET_HEAVY_RATIO = 0.77;
  /** The target: no query slower than the baseline by more than this factor. */
  public static final double TARGET_MAX_QUERY_RATIO = 1.05;

  /** One query run. */
  public record Run(String query, String manager, int round, boolean warmup, long startEpochMillis, long wallMillis,
      int rows, QueryMetrics metrics, Map<String, Long> slipstream) {}

  /** CPU Spark's (sort shuffle) scan input and shuffle bytes written of a query: what makes it shuffle-heavy. */
  public record CpuFigures(long inputBytes, long shuffleBytesWritten) {}

  /** Statistics of one query under one manager over the measured rounds. */
  public record Stat(long medianMillis, long minMillis, long maxMillis, int n, QueryMetrics medianMetrics) {}

  private final BenchOptions options;
  private final List<String> queries;
  private final List<String> managers;
  private final List<Run> runs = new ArrayList<>();
  private final List<String> mismatches = new ArrayList<>();
  private final Map<String, CpuFigures> storedCpu = new LinkedHashMap<>();
  private String sparkVersion = "unknown";

  public BenchResults(BenchOptions options) {
    this.options = options;
    this.queries = List.copyOf(options.queries());
    this.managers = options.managers();
  }

  public BenchOptions options() {
    return options;
  }

  public List<String> queries() {
    return queries;
  }

  public List<String> managers() {
    return managers;
  }

  /** The manager the others are compared with ({@link BenchOptions#baseline()}). */
  public String baseline() {
    return options.baseline();
  }

  /** The managers compared with the baseline. */
  public List<String> compared() {
    return options.compared();
  }

  public synchronized void sparkVersion(String v) {
    sparkVersion = v;
  }

  public synchronized String sparkVersion() {
    return sparkVersion;
  }

  /** CPU Spark's figures of {@code query} from stored reference rows, for a run where CPU Spark does not run it. */
  public synchronized void storedCpu(String query, CpuFigures f) {
    storedCpu.put(query, f);
  }

  /** Queries whose CPU Spark figures (and rows) came from stored reference rows. */
  public synchronized List<String> storedCpuQueries() {
    return List.copyOf(storedCpu.keySet());
  }

  /** CPU Spark's figures of {@code query} as stored with its reference rows, or null. */
  public synchronized CpuFigures storedCpu(String query) {
    return storedCpu.get(query);
  }

  /** CPU Spark's figures of {@code query}: the median of its runs here, else the stored ones, else null. */
  public CpuFigures cpu(String query) {
    Stat s = stat(query, "sort");
    if (s != null) {
      return new CpuFigures(s.medianMetrics().inputBytes(), s.medianMetrics().shuffleBytesWritten());
    }
    synchronized (this) {
      return storedCpu.get(query);
    }
  }

  public synchronized void add(Run r) {
    runs.add(r);
  }

  public synchronized List<Run> runs() {
    return List.copyOf(runs);
  }

  public synchronized void mismatch(String what) {
    mismatches.add(what);
  }

  public synchronized List<String> mismatches() {
    return List.copyOf(mismatches);
  }

  /**
   * Measured (not warm-up) runs of one query under one manager, in round order; for a manager that
   * runs in the first round only (CPU Spark in the GPU mode), that run even when it was a warm-up.
   */
  public List<Run> measured(String query, String manager) {
    boolean once = !options.runs(manager, 1);
    return runs().stream().filter(r -> (once || !r.warmup()) && r.query().equals(query) && r.manager().equals(manager))
        .collect(Collectors.toList());
  }

  public Stat stat(String query, String manager) {
    List<Run> rs = measured(query, manager);
    if (rs.isEmpty()) {
      return null;
    }
    List<Long> wall = rs.stream().map(Run::wallMillis).sorted().collect(Collectors.toList());
    QueryMetrics m = new QueryMetrics(med(rs, r -> r.metrics().tasks()), med(rs, r -> r.metrics().inputBytes()),
        med(rs, r -> r.metrics().shuffleBytesWritten()), med(rs, r -> r.metrics().shuffleBytesRead()),
        med(rs, r -> r.metrics().shuffleRemoteBytesRead()), med(rs, r -> r.metrics().shuffleWriteNanos()),
        med(rs, r -> r.metrics().fetchWaitMillis()), med(rs, r -> r.metrics().peakExecutionMemory()),
        med(rs, r -> r.metrics().peakHeapBytes()), med(rs, r -> r.metrics().peakDirectBytes()),
        med(rs, r -> r.metrics().stages()), med(rs, r -> r.metrics().taskRunMillis()),
        med(rs, r -> r.metrics().executorsUsed()), med(rs, r -> r.metrics().gpuSemaphoreWaitMillis()));
    return new Stat(median(wall), wall.get(0), wall.get(wall.size() - 1), wall.size(), m);
  }

  private static long med(List<Run> rs, ToLongFunction<Run> f) {
    return median(rs.stream().map(f::applyAsLong).sorted().collect(Collectors.toList()));
  }

  static long median(List<Long> sorted) {
    int n = sorted.size();
    if (n == 0) {
      return 0;
    }
    return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
  }

  /** Shuffle-heavy: under sort shuffle the query wrote more shuffle bytes than 10% of what its scans read. */
  public boolean heavy(String query) {
    CpuFigures c = cpu(query);
    return c != null && c.shuffleBytesWritten() > HEAVY_FRACTION * c.inputBytes();
  }

  /** Median time of {@code manager} over median time of the baseline, or NaN. */
  public double ratio(String query, String manager) {
    Stat a = stat(query, manager);
    Stat b = stat(query, baseline());
    return a == null || b == null || b.medianMillis() == 0 ? Double.NaN : (double) a.medianMillis() / b.medianMillis();
  }

  /** Sum of median times over the given queries. */
  public long total(String manager, List<String> qs) {
    long t = 0;
    for (String q : qs) {
      Stat s = stat(q, manager);
      t += s == null ? 0 : s.medianMillis();
    }
    return t;
  }

  public List<String> heavyQueries() {
    return queries.stream().filter(this::heavy).collect(Collectors.toList());
  }

  public double totalRatio(String manager, List<String> qs) {
    long base = total(baseline(), qs);
    return base == 0 ? Double.NaN : (double) total(manager, qs) / base;
  }

  /** Per measured round: sum over {@code qs} of that round's time under {@code manager} over the baseline's. */
  public List<Double> roundRatios(String manager, List<String> qs) {
    Map<Integer, long[]> byRound = new LinkedHashMap<>();
    for (Run r : runs()) {
      if (!r.warmup() && qs.contains(r.query())) {
        long[] t = byRound.computeIfAbsent(r.round(), k -> new long[2]);
        if (r.manager().equals(baseline())) {
          t[0] += r.wallMillis();
        } else if (r.manager().equals(manager)) {
          t[1] += r.wallMillis();
        }
      }
    }
    List<Double> out = new ArrayList<>();
    byRound.values().forEach(t -> out.add(t[0] == 0 ? Double.NaN : (double) t[1] / t[0]));
    return out;
  }

  /** Largest per-query ratio of a manager and the query it belongs to. */
  public Map.Entry<String, Double> worst(String manager) {
    String q = null;
    double w = Double.NEGATIVE_INFINITY;
    for (String query : queries) {
      double r = ratio(query, manager);
      if (!Double.isNaN(r) && r > w) {
        w = r;
        q = query;
      }
    }
    return q == null ? null : Map.entry(q, w);
  }

  static double medianDouble(List<Double> v) {
    List<Double> s = new ArrayList<>(v);
    Collections.sort(s);
    int n = s.size();
    return n == 0 ? Double.NaN : n % 2 == 1 ? s.get(n / 2) : (s.get(n / 2 - 1) + s.get(n / 2)) / 2;
  }
}
