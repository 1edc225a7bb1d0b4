package dev.slipstream.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;
import org.apache.spark.sql.SparkSession;

/**
 * The bundled example job: runs the shuffle workloads on a local cluster, once under Spark's
 * sort shuffle and once under Slipstream (tcp transport), checks that both give the same rows,
 * and prints a summary: time per workload under each manager, and the bytes Slipstream's
 * executors moved one-sided (read back from the executors over RPC).
 *
 * <p>Usage: {@code ExampleJob [--executors N] [--only name,name] [--transport tcp]}
 */
public final class ExampleJob {
  private ExampleJob() {}

  public static void main(String[] args) {
    int executors = 2;
    String transport = "tcp";
    List<String> only = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--executors" -> executors = Integer.parseInt(args[++i]);
        case "--transport" -> transport = args[++i];
        case "--only" -> only.addAll(List.of(args[++i].split(",")));
        default -> {
          System.err.println("unknown option " + args[i] + "; expected --executors N, --transport NAME, --only a,b");
          System.exit(2);
        }
      }
    }
    Map<String, Function<SparkSession, List<String>>> workloads = new LinkedHashMap<>(Workloads.all());
    if (!only.isEmpty()) {
      workloads.keySet().retainAll(only);
    }
    Map<String, long[]> times = new LinkedHashMap<>();
    Map<String, List<String>> sortRows = run("sort", LocalCluster.SORT, executors, transport, workloads, times, 0);
    Map<String, Map<String, Long>> metrics = new LinkedHashMap<>();
    Map<String, List<String>> slipRows = run("slipstream", LocalCluster.SLIPSTREAM, executors, transport, workloads,
        times, 1, metrics);

    System.out.println();
    System.out.println("Slipstream example job: " + executors + " executors, local-cluster, transport " + transport);
    System.out.println(String.format(Locale.ROOT, "%-34s %10s %12s %7s  %s", "workload", "sort ms", "slipstream ms",
        "ratio", "rows"));
    int mismatches = 0;
    long sortTotal = 0;
    long slipTotal = 0;
    for (String name : workloads.keySet()) {
      long[] t = times.get(name);
      boolean same = sortRows.get(name).equals(slipRows.get(name));
      mismatches += same ? 0 : 1;
      sortTotal += t[0];
      slipTotal += t[1];
      System.out.println(String.format(Locale.ROOT, "%-34s %10d %12d %7.2f  %s", name, t[0], t[1],
          (double) t[1] / Math.max(1, t[0]), same ? "equal (" + sortRows.get(name).size() + ")" : "MISMATCH"));
    }
    System.out.println(String.format(Locale.ROOT, "%-34s %10d %12d %7.2f", "total", sortTotal, slipTotal,
        (double) slipTotal / Math.max(1, sortTotal)));
    long written = metrics.values().stream().mapToLong(m -> m.getOrDefault("transport.bytesWritten", 0L)).sum();
    long requests = metrics.values().stream().mapToLong(m -> m.getOrDefault("requests.served", 0L)).sum();
    System.out.println("Slipstream executors wrote " + written + " bytes one-sided in " + requests
        + " write requests (per executor: " + metrics.keySet() + ")");
    if (mismatches > 0) {
      System.out.println(mismatches + " workload(s) gave different rows under Slipstream: FAILED");
      System.exit(1);
    }
    System.out.println("All workloads gave identical rows under both shuffle managers.");
  }

  @SafeVarargs
  private static Map<String, List<String>> run(String label, String manager, int executors, String transport,
      Map<String, Function<SparkSession, List<String>>> workloads, Map<String, long[]> times, int column,
      Map<String, Map<String, Long>>... metricsOut) {
    SparkSession spark = LocalCluster.start(LocalCluster.builder("example-" + label, manager, executors)
        .config("spark.slipstream.transport", transport), executors);
    Map<String, List<String>> rows = new LinkedHashMap<>();
    try {
      for (Map.Entry<String, Function<SparkSession, List<String>>> w : workloads.entrySet()) {
        System.out.println("[" + label + "] " + w.getKey() + " ...");
        long t0 = System.nanoTime();
        rows.put(w.getKey(), w.getValue().apply(spark));
        times.computeIfAbsent(w.getKey(), k -> new long[2])[column] = (System.nanoTime() - t0) / 1_000_000;
      }
      if (metricsOut.length > 0) {
        metricsOut[0].putAll(LocalCluster.executorMetrics());
      }
    } finally {
      spark.stop();
    }
    return rows;
  }
}
