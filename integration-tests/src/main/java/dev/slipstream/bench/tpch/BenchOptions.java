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
 */
public record BenchOptions(double scaleFactor, List<String> queries, int executors, int cores, String executorMemory,
    int warmups, int reps, List<String> transports, int shufflePartitions, Path dataDir, Path outDir, Path jfrDir) {

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
        --data DIR            generated data, reused across runs (default data/tpch)
        --out DIR             report folder (default bench-out/tpch)
        --jfr DIR             record a JFR profile (settings=default) of every executor into DIR/<manager>/
      """;

  public static BenchOptions defaults() {
    return new BenchOptions(0.1, allQueries(), 2, 1, "1g", 1, 2, List.of("tcp"), 200, Path.of("data/tpch"),
        Path.of("bench-out/tpch"), null);
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
    BenchOptions o = defaults();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.equals("-h") || a.equals("--help")) {
        throw new IllegalArgumentException("");
      }
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException("option " + a + " needs a value");
      }
      String v = args[++i];
      o = switch (a) {
        case "--sf", "--scale-factor" -> o.with(positive(a, Double.parseDouble(v)), o.queries, o.executors, o.cores,
            o.executorMemory, o.warmups, o.reps, o.transports, o.shufflePartitions, o.dataDir, o.outDir, o.jfrDir);
        case "--queries" -> o.with(o.scaleFactor, queries(v), o.executors, o.cores, o.executorMemory, o.warmups,
            o.reps, o.transports, o.shufflePartitions, o.dataDir, o.outDir, o.jfrDir);
        case "--executors" -> o.with(o.scaleFactor, o.queries, (int) positive(a, Integer.parseInt(v)), o.cores,
            o.executorMemory, o.warmups, o.reps, o.transports, o.shufflePartitions, o.dataDir, o.outDir, o.jfrDir);
        case "--cores" -> o.with(o.scaleFactor, o.queries, o.executors, (int) positive(a, Integer.parseInt(v)),
            o.executorMemory, o.warmups, o.reps, o.transports, o.shufflePartitions, o.dataDir, o.outDir, o.jfrDir);
        case "--executor-memory" -> o.with(o.scaleFactor, o.queries, o.executors, o.cores, v, o.warmups, o.reps,
            o.transports, o.shufflePartitions, o.dataDir, o.outDir, o.jfrDir);
        case "--reps" -> o.with(o.scaleFactor, o.queries, o.executors, o.cores, o.executorMemory, o.warmups,
            (int) positive(a, Integer.parseInt(v)), o.transports, o.shufflePartitions, o.dataDir, o.outDir, o.jfrDir);
        case "--warmups" -> o.with(o.scaleFactor, o.queries, o.executors, o.cores, o.executorMemory,
            Math.max(0, Integer.parseInt(v)), o.reps, o.transports, o.shufflePartitions, o.dataDir, o.outDir, o.jfrDir);
        case "--transports" -> o.with(o.scaleFactor, o.queries, o.executors, o.cores, o.executorMemory, o.warmups,
            o.reps, v.equals("none") ? List.of() : List.of(v.split(",")), o.shufflePartitions, o.dataDir, o.outDir,
            o.jfrDir);
        case "--shuffle-partitions" -> o.with(o.scaleFactor, o.queries, o.executors, o.cores, o.executorMemory,
            o.warmups, o.reps, o.transports, (int) positive(a, Integer.parseInt(v)), o.dataDir, o.outDir, o.jfrDir);
        case "--data" -> o.with(o.scaleFactor, o.queries, o.executors, o.cores, o.executorMemory, o.warmups, o.reps,
            o.transports, o.shufflePartitions, Path.of(v), o.outDir, o.jfrDir);
        case "--out" -> o.with(o.scaleFactor, o.queries, o.executors, o.cores, o.executorMemory, o.warmups, o.reps,
            o.transports, o.shufflePartitions, o.dataDir, Path.of(v), o.jfrDir);
        case "--jfr" -> o.with(o.scaleFactor, o.queries, o.executors, o.cores, o.executorMemory, o.warmups, o.reps,
            o.transports, o.shufflePartitions, o.dataDir, o.outDir, Path.of(v));
        default -> throw new IllegalArgumentException("unknown option " + a);
      };
    }
    return o;
  }

  private BenchOptions with(double sf, List<String> q, int e, int c, String mem, int w, int r, List<String> t, int sp,
      Path data, Path out, Path jfr) {
    return new BenchOptions(sf, q, e, c, mem, w, r, t, sp, data, out, jfr);
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

  /** Shuffle managers in run order: {@code sort}, then {@code slipstream-<transport>} per transport. */
  public List<String> managers() {
    List<String> m = new ArrayList<>();
    m.add("sort");
    transports.forEach(t -> m.add("slipstream-" + t));
    return m;
  }

  /** Executor memory in MiB, for the local cluster's worker size. */
  int executorMemoryMb() {
    String s = executorMemory.trim().toLowerCase(Locale.ROOT);
    long mult = s.endsWith("g") ? 1024 : 1;
    String digits = s.replaceAll("[gm]$", "");
    return (int) (Long.parseLong(digits) * mult);
  }
}
