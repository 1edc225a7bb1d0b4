package dev.slipstream.bench.tpch;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * Writes a benchmark's results: the console table, {@code tpch.json} (options, machine, every run
 * and the summary), {@code tpch.md} (tables and verdict) and {@code tpch.png} ({@link ChartWriter}).
 */
public final class ReportWriter {
  private ReportWriter() {}

  public static void writeAll(BenchResults r, Machine machine, Machine.Load before, Machine.Load after, Path data)
      throws IOException {
    Path out = r.options().outDir();
    Files.createDirectories(out);
    String when = Instant.now().toString();
    Files.writeString(out.resolve("tpch.json"), json(r, machine, before, after, data, when));
    Files.writeString(out.resolve("tpch.md"), markdown(r, machine, before, after, when));
    try {
      ChartWriter.write(r, out.resolve("tpch.png"));
    } catch (LinkageError | InternalError | java.awt.AWTError e) {
      // Java2D draws text through the JDK's font libraries (FreeType, HarfBuzz, fontconfig and a
      // font); a machine without them still gets every figure in the JSON and markdown.
      if (!chartWarned) {
        chartWarned = true;
        System.err.println("slipstream-bench: no chart (" + e + "); the figures are in tpch.json and tpch.md");
      }
    }
  }

  private static boolean chartWarned;

  private static String mb(long bytes) {
    return String.format(Locale.ROOT, "%.1f", bytes / 1048576.0);
  }

  private static String ratio(double r) {
    return Double.isNaN(r) ? "-" : String.format(Locale.ROOT, "%.2f", r);
  }

  /** The time table and the metrics table, as fixed-width text. */
  public static String consoleTable(BenchResults r) {
    StringBuilder sb = new StringBuilder();
    List<String> managers = r.managers();
    sb.append(String.format(Locale.ROOT, "%-5s %-5s", "query", "heavy"));
    for (String m : managers) {
      sb.append(String.format(Locale.ROOT, " %26s", m + " ms (min-max)"));
    }
    for (String m : r.compared()) {
      sb.append(String.format(Locale.ROOT, " %8s", "ratio"));
    }
    sb.append(String.format(Locale.ROOT, " %10s %10s%n", "shuffle MB", "input MB"));
    for (String q : r.queries()) {
      sb.append(String.format(Locale.ROOT, "%-5s %-5s", q, r.heavy(q) ? "yes" : ""));
      for (String m : managers) {
        BenchResults.Stat s = r.stat(q, m);
        sb.append(String.format(Locale.ROOT, " %26s",
            s == null ? "-" : s.medianMillis() + " (" + s.minMillis() + "-" + s.maxMillis() + ")"));
      }
      for (String m : r.compared()) {
        sb.append(String.format(Locale.ROOT, " %8s", ratio(r.ratio(q, m))));
      }
      BenchResults.CpuFigures cpu = r.cpu(q); // CPU Spark's figures, the query's own
      sb.append(String.format(Locale.ROOT, " %10s %10s%n", cpu == null ? "-" : mb(cpu.shuffleBytesWritten()),
          cpu == null ? "-" : mb(cpu.inputBytes())));
    }
    List<String> heavy = r.heavyQueries();
    for (String[] row : List.of(new String[] {"all", ""}, new String[] {"heavy", "yes"})) {
      List<String> qs = row[0].equals("all") ? r.queries() : heavy;
      sb.append(String.format(Locale.ROOT, "%-5s %-5s", row[0], row[1]));
      for (String m : managers) {
        sb.append(String.format(Locale.ROOT, " %26d", r.total(m, qs)));
      }
      for (String m : r.compared()) {
        sb.append(String.format(Locale.ROOT, " %8s", ratio(r.totalRatio(m, qs))));
      }
      sb.append(System.lineSeparator());
    }
    sb.append("Shuffle-heavy (sort's shuffle bytes > 10% of input bytes): ").append(heavy).append(System.lineSeparator());
    for (String m : r.compared()) {
      sb.append(verdict(r, m)).append(System.lineSeparator());
    }
    return sb.toString();
  }

  /**
   * Queries whose shuffle under {@code manager} wrote more than a fifth more or less than under the
   * baseline (medians), one line each: adaptive execution chose another plan there (q08 and q09 of
   * TPC-H switch joins now and then, under any manager), so that query's ratio compares two plans
   * rather than two shuffles. By query, in the run's order; empty for the GPU path, whose device
   * tables are a different format.
   */
  static Map<String, String> otherPlans(BenchResults r, String manager) {
    Map<String, String> out = new java.util.LinkedHashMap<>();
    if (BenchOptions.gpuPath(manager)) {
      return out;
    }
    for (String q : r.queries()) {
      BenchResults.Stat base = r.stat(q, r.baseline());
      BenchResults.Stat s = r.stat(q, manager);
      if (base == null || s == null) {
        continue;
      }
      long a = base.medianMetrics().shuffleBytesWritten();
      long b = s.medianMetrics().shuffleBytesWritten();
      if (Math.max(a, b) > 1.2 * Math.min(a, b) + (1 << 20)) {
        out.put(q, String.format(Locale.ROOT, "%s under %s shuffled %s MiB against %s MiB under %s (medians): adaptive"
            + " execution chose another plan, so its ratio compares two plans", q, manager, mb(b), mb(a), r.baseline()));
      }
    }
    return out;
  }

  /** One sentence: the ratios against the benchmark's targets. */
  static String verdict(BenchResults r, String manager) {
    List<String> heavy = r.heavyQueries();
    double total = r.totalRatio(manager, heavy);
    Map.Entry<String, Double> worst = r.worst(manager);
    List<Double> rounds = r.roundRatios(manager, heavy);
    boolean queryMet = worst != null && worst.getValue() <= BenchResults.TARGET_MAX_QUERY_RATIO;
    String slowest = String.format(Locale.ROOT, "slowest query %s at %s (target <= %.2f)",
        worst == null ? "-" : worst.getKey(), worst == null ? "-" : ratio(worst.getValue()),
        BenchResults.TARGET_MAX_QUERY_RATIO);
    if (heavy.isEmpty()) {
      // The total target is over shuffle-heavy queries; a run of none (e.g. q06 alone) can only meet the other.
      return String.format(Locale.ROOT, "%s / %s: no shuffle-heavy query in this run, so no total; %s: %s", manager,
          r.baseline(), slowest, queryMet ? "per-query target met" : "per-query target NOT met");
    }
    boolean met = total <= BenchResults.TARGET_HEAVY_RATIO && queryMet;
    return String.format(Locale.ROOT, "%s / %s over shuffle-heavy queries: %s (per round: %s; target <= %.2f); %s: %s",
        manager, r.baseline(), ratio(total), rounds.stream().map(ReportWriter::ratio).collect(Collectors.joining(", ")),
        BenchResults.TARGET_HEAVY_RATIO, slowest, met ? "target met" : "target NOT met");
  }

  static String markdown(BenchResults r, Machine machine, Machine.Load before, Machine.Load after, String when) {
    BenchOptions o = r.options();
    List<String> managers = r.managers();
    StringBuilder sb = new StringBuilder();
    sb.append("# TPC-H on Slipstream: SF").append(TpchBenchmark.fmt(o.scaleFactor())).append("\n\n");
    sb.append(String.format(Locale.ROOT,
        "%s. Spark %s, local-cluster with %d executors x %d core(s), %s heap each, spark.sql.shuffle.partitions=%d, "
            + "%d warm-up + %d measured rounds (median, min-max). Machine: %s. Load average before %s, after %s.%n%n",
        when, r.sparkVersion(), o.executors(), o.cores(), o.executorMemory(), o.shufflePartitions(), o.warmups(), o.reps(),
        machine.summary(), before, after));
    if (o.gpu()) {
      sb.append(String.format(Locale.ROOT, "GPU mode: the RAPIDS Accelerator (%s), %s of GPU memory per executor for "
          + "its pool; ratios are to %s (RAPIDS with its own shuffle manager). %s%s%n%n", o.rapidsJar().getFileName(),
          o.gpuAllocFraction(), r.baseline(), cpuSource(r),
          o.confs().isEmpty() ? "" : " Further settings: " + String.join(", ", o.confs()) + "."));
    }
    if (!r.mismatches().isEmpty()) {
      sb.append("**RESULT MISMATCH, run failed:**\n\n");
      r.mismatches().forEach(m -> sb.append("- ").append(m).append('\n'));
      sb.append('\n');
    }
    sb.append("![time per query](tpch.png)\n\n| query | shuffle-heavy |");
    managers.forEach(m -> sb.append(' ').append(m).append(" ms |"));
    r.compared().forEach(m -> sb.append(' ').append(m).append(" / ").append(r.baseline()).append(" |"));
    sb.append("\n|---|---|");
    managers.forEach(m -> sb.append("---:|"));
    r.compared().forEach(m -> sb.append("---:|"));
    sb.append('\n');
    Map<String, Map<String, String>> anotherPlan = new java.util.LinkedHashMap<>();
    r.compared().forEach(m -> anotherPlan.put(m, otherPlans(r, m)));
    for (String q : r.queries()) {
      sb.append("| ").append(q).append(" | ").append(r.heavy(q) ? "yes" : "").append(" |");
      for (String m : managers) {
        BenchResults.Stat s = r.stat(q, m);
        sb.append(' ').append(s == null ? "-" : s.medianMillis() + " (" + s.minMillis() + "-" + s.maxMillis() + ")")
            .append(" |");
      }
      r.compared().forEach(m -> sb.append(' ').append(ratio(r.ratio(q, m)))
          .append(anotherPlan.get(m).containsKey(q) ? " *" : "").append(" |"));
      sb.append('\n');
    }
    for (String label : List.of("total, all queries", "total, shuffle-heavy")) {
      List<String> qs = label.endsWith("all queries") ? r.queries() : r.heavyQueries();
      sb.append("| **").append(label).append("** | |");
      managers.forEach(m -> sb.append(" **").append(r.total(m, qs)).append("** |"));
      r.compared().forEach(m -> sb.append(" **").append(ratio(r.totalRatio(m, qs))).append("** |"));
      sb.append('\n');
    }
    sb.append('\n');
    r.compared().forEach(m -> sb.append("- ").append(verdict(r, m)).append('\n'));
    anotherPlan.values().forEach(lines -> lines.values().forEach(l -> sb.append("- \\* ").append(l).append('\n')));
    sb.append("\nSpark's task metrics (medians; MiB; times in ms; peak memory = largest executor heap + direct "
        + "buffers seen at a task's end):\n\n| query | manager | input | shuffle written | shuffle read (remote) "
        + "| shuffle write time | fetch wait | peak task execution memory | peak executor memory | stages | tasks | task time | executors |"
        + (o.gpu() ? " GPU semaphore wait |" : "") + "\n"
        + "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + (o.gpu() ? "---:|" : "") + "\n");
    for (String q : r.queries()) {
      for (String m : managers) {
        BenchResults.Stat s = r.stat(q, m);
        if (s == null) {
          continue;
        }
        QueryMetrics x = s.medianMetrics();
        sb.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %s (%s) | %d | %d | %s | %s | %d | %d | %d | %d |",
            q, m, mb(x.inputBytes()), mb(x.shuffleBytesWritten()), mb(x.shuffleBytesRead()),
            mb(x.shuffleRemoteBytesRead()), x.shuffleWriteNanos() / 1_000_000, x.fetchWaitMillis(),
            mb(x.peakExecutionMemory()), mb(x.peakExecutorMemory()), x.stages(), x.tasks(), x.taskRunMillis(),
            x.executorsUsed()));
        sb.append(o.gpu() ? " " + x.gpuSemaphoreWaitMillis() + " |\n" : "\n");
      }
    }
    for (String gm : managers) {
      if (!BenchOptions.gpuPath(gm)) {
        continue;
      }
      sb.append("\nShare of shuffle bytes on Slipstream's GPU path under ").append(gm)
          .append(" (medians; MiB; device-table blocks stored by map tasks against Spark's shuffle bytes written, the share"
              + " the median of each run's; the rest went over RAPIDS' host-serialized exchanges):\n\n| query | shuffle written | on the GPU path |"
              + " share |\n|---|---:|---:|---:|\n");
      long allWritten = 0;
      long allGpu = 0;
      for (String q : r.queries()) {
        BenchResults.Stat s = r.stat(q, gm);
        if (s == null) {
          continue;
        }
        long written = s.medianMetrics().shuffleBytesWritten();
        long gpu = gpuShuffleBytes(r, q, gm);
        allWritten += written;
        allGpu += gpu;
        sb.append(String.format(Locale.ROOT, "| %s | %s | %s | %s |%n", q, mb(written), mb(gpu), gpuShare(r, q, gm)));
      }
      sb.append(String.format(Locale.ROOT, "| **all** | **%s** | **%s** | **%s** |%n", mb(allWritten), mb(allGpu),
          share(allGpu, allWritten)));
    }
    return sb.toString();
  }

  /**
   * The median over measured runs under GPU-path manager {@code manager} of the GPU path's bytes of
   * {@code query} ({@link TpchBenchmark#GPU_BYTES}).
   */
  static long gpuShuffleBytes(BenchResults r, String query, String manager) {
    List<Long> v = r.measured(query, manager).stream()
        .map(x -> x.slipstream().getOrDefault(TpchBenchmark.GPU_BYTES, 0L)).sorted().collect(Collectors.toList());
    return v.isEmpty() ? 0 : v.get(v.size() / 2);
  }

  /** The median over measured runs under {@code manager} of each run's GPU path bytes over its shuffle bytes written. */
  static String gpuShare(BenchResults r, String query, String manager) {
    List<Double> v = r.measured(query, manager).stream()
        .filter(x -> x.metrics().shuffleBytesWritten() > 0)
        .map(x -> (double) x.slipstream().getOrDefault(TpchBenchmark.GPU_BYTES, 0L) / x.metrics().shuffleBytesWritten())
        .sorted().collect(Collectors.toList());
    return v.isEmpty() ? "-" : String.format(Locale.ROOT, "%.0f%%", 100.0 * v.get(v.size() / 2));
  }

  private static String share(long part, long whole) {
    return whole <= 0 ? "-" : String.format(Locale.ROOT, "%.0f%%", 100.0 * part / whole);
  }

  /** Where the GPU mode's reference rows came from: CPU Spark in this run, stored rows, or both. */
  static String cpuSource(BenchResults r) {
    List<String> stored = r.storedCpuQueries();
    if (stored.isEmpty()) {
      return "CPU Spark with sort shuffle ran once, in the first round, for the reference rows.";
    }
    String which = stored.size() == r.queries().size() ? "every query" : String.join(", ", stored);
    return "CPU Spark's reference rows (and its shuffle and input bytes, which tell shuffle-heavy queries apart) "
        + "came from rows stored by an earlier CPU Spark run on the same data for " + which
        + (stored.size() == r.queries().size() ? "; CPU Spark did not run." : "; CPU Spark ran the others once.");
  }

  static String json(BenchResults r, Machine machine, Machine.Load before, Machine.Load after, Path data, String when) {
    BenchOptions o = r.options();
    Json j = new Json();
    j.open('{');
    j.field("benchmark", "tpch").field("finished", when).field("sparkVersion", r.sparkVersion())
        .field("scaleFactor", o.scaleFactor()).field("data", data.toAbsolutePath().toString());
    j.key("options").open('{').field("executors", o.executors()).field("coresPerExecutor", o.cores())
        .field("executorMemory", o.executorMemory()).field("warmups", o.warmups()).field("reps", o.reps())
        .field("shufflePartitions", o.shufflePartitions()).strings("queries", o.queries())
        .strings("managers", r.managers()).field("baseline", r.baseline()).strings("confs", o.confs());
    if (o.gpu()) {
      j.field("rapidsJar", o.rapidsJar().getFileName().toString()).field("gpuAllocFraction", o.gpuAllocFraction());
      if (o.rapidsGpuJar() != null) {
        j.field("rapidsGpuJar", o.rapidsGpuJar().getFileName().toString());
      }
    }
    j.close('}');
    j.key("machine").open('{').field("cores", machine.cores()).field("cpu", machine.cpu())
        .field("memoryBytes", machine.memoryBytes()).field("java", machine.java()).field("os", machine.os())
        .field("loadBefore", before.toString()).field("loadAfter", after.toString()).close('}');
    j.strings("mismatches", r.mismatches());
    j.strings("shuffleHeavyQueries", r.heavyQueries());
    j.strings("storedReferenceQueries", r.storedCpuQueries());
    j.key("queries").open('[');
    for (String q : r.queries()) {
      j.open('{').field("query", q).field("shuffleHeavy", r.heavy(q));
      BenchResults.CpuFigures c = r.storedCpu(q);
      if (c != null) {
        // CPU Spark's figures from its stored rows: what tells this query's shuffle-heavy flag when the
        // report is read back (ChartFromJson) and CPU Spark did not run.
        j.key("storedCpu").open('{').field("inputBytes", c.inputBytes())
            .field("shuffleBytesWritten", c.shuffleBytesWritten()).close('}');
      }
      j.key("managers").open('{');
      for (String m : r.managers()) {
        BenchResults.Stat s = r.stat(q, m);
        if (s == null) {
          continue;
        }
        j.key(m).open('{').field("medianMillis", s.medianMillis()).field("minMillis", s.minMillis())
            .field("maxMillis", s.maxMillis()).field("n", s.n());
        metrics(j.key("medianMetrics"), s.medianMetrics());
        j.close('}');
      }
      j.close('}');
      j.key("ratioToBaseline").open('{');
      r.compared().forEach(m -> j.field(m, r.ratio(q, m)));
      j.close('}').close('}');
    }
    j.close(']');
    j.key("totals").open('{');
    for (String m : r.managers()) {
      j.key(m).open('{').field("allMillis", r.total(m, r.queries()))
          .field("shuffleHeavyMillis", r.total(m, r.heavyQueries()));
      if (r.compared().contains(m)) {
        j.field("ratioAll", r.totalRatio(m, r.queries())).field("ratioShuffleHeavy", r.totalRatio(m, r.heavyQueries()));
        j.key("ratioShuffleHeavyPerRound").open('[');
        r.roundRatios(m, r.heavyQueries()).forEach(j::value);
        j.close(']');
        Map.Entry<String, Double> w = r.worst(m);
        if (w != null) {
          j.field("slowestQuery", w.getKey()).field("slowestQueryRatio", w.getValue());
        }
      }
      j.close('}');
    }
    j.close('}');
    j.key("target").open('{').field("shuffleHeavyRatioAtMost", BenchResults.TARGET_HEAVY_RATIO)
        .field("queryRatioAtMost", BenchResults.TARGET_MAX_QUERY_RATIO).close('}');
    j.key("runs").open('[');
    for (BenchResults.Run run : r.runs()) {
      j.open('{').field("query", run.query()).field("manager", run.manager()).field("round", run.round())
          .field("warmup", run.warmup()).field("startEpochMillis", run.startEpochMillis()).field("wallMillis", run.wallMillis()).field("rows", run.rows());
      metrics(j.key("metrics"), run.metrics());
      if (!run.slipstream().isEmpty()) {
        j.key("slipstreamExecutorCounters").open('{');
        run.slipstream().forEach(j::field);
        j.close('}');
      }
      j.close('}');
    }
    j.close(']');
    j.close('}');
    return j.toString() + "\n";
  }

  private static void metrics(Json j, QueryMetrics m) {
    j.open('{').field("tasks", m.tasks()).field("inputBytes", m.inputBytes())
        .field("shuffleBytesWritten", m.shuffleBytesWritten()).field("shuffleBytesRead", m.shuffleBytesRead())
        .field("shuffleRemoteBytesRead", m.shuffleRemoteBytesRead()).field("shuffleWriteNanos", m.shuffleWriteNanos())
        .field("fetchWaitMillis", m.fetchWaitMillis()).field("peakExecutionMemory", m.peakExecutionMemory())
        .field("peakHeapBytes", m.peakHeapBytes()).field("peakDirectBytes", m.peakDirectBytes())
        .field("stages", m.stages()).field("taskRunMillis", m.taskRunMillis())
        .field("executorsUsed", m.executorsUsed()).field("gpuSemaphoreWaitMillis", m.gpuSemaphoreWaitMillis())
        .close('}');
  }
}
