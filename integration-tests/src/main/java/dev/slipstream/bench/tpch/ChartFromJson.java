package dev.slipstream.bench.tpch;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Draws the chart of a finished benchmark from its {@code tpch.json}, for runs on a machine that
 * could not draw it (no font libraries there):
 * {@code java -cp ... dev.slipstream.bench.tpch.ChartFromJson DIR/tpch.json [DIR/tpch.png]}.
 */
public final class ChartFromJson {
  private ChartFromJson() {}

  public static void main(String[] args) throws IOException {
    if (args.length < 1 || args.length > 2) {
      System.err.println("Usage: ChartFromJson TPCH_JSON [PNG] (default: tpch.png beside the JSON)");
      System.exit(2);
    }
    Path json = Path.of(args[0]);
    Path png = args.length == 2 ? Path.of(args[1]) : json.resolveSibling("tpch.png");
    ChartWriter.write(read(json), png);
    System.out.println("Chart: " + png.toAbsolutePath());
  }

  /** The options and every run of a report written by {@link ReportWriter}. */
  static BenchResults read(Path file) throws IOException {
    JsonNode root = new ObjectMapper().readTree(file.toFile());
    JsonNode o = root.path("options");
    List<String> managers = strings(o.path("managers"));
    List<String> transports = new ArrayList<>();
    List<String> compressions = new ArrayList<>();
    boolean gpu = managers.contains(BenchOptions.RAPIDS_DEFAULT);
    for (String m : managers) {
      if (BenchOptions.gpuPath(m)) {
        compressions.add(BenchOptions.gpuCompression(m));
      } else if (BenchOptions.slipstream(m)) {
        transports.add(BenchOptions.transport(m));
      }
    }
    BenchOptions options = new BenchOptions(root.path("scaleFactor").asDouble(), strings(o.path("queries")),
        o.path("executors").asInt(), o.path("coresPerExecutor").asInt(), o.path("executorMemory").asText(),
        o.path("warmups").asInt(), o.path("reps").asInt(), transports, o.path("shufflePartitions").asInt(),
        Path.of(root.path("data").asText()), file.getParent(), null,
        gpu ? Path.of(o.path("rapidsJar").asText("rapids.jar")) : null, null,
        gpu ? o.path("gpuAllocFraction").asDouble() : Double.NaN, strings(o.path("confs")),
        compressions.isEmpty() ? null : Path.of(o.path("rapidsGpuJar").asText("rapids-gpu.jar")),
        compressions.isEmpty() ? List.of("none") : compressions);
    if (!options.managers().equals(managers)) {
      throw new IOException(file + ": managers " + managers + " are not a run order this runner writes (expected "
          + options.managers() + ")");
    }
    BenchResults r = new BenchResults(options);
    r.sparkVersion(root.path("sparkVersion").asText("unknown"));
    strings(root.path("mismatches")).forEach(r::mismatch);
    for (JsonNode q : root.path("queries")) {
      JsonNode c = q.path("storedCpu");
      if (!c.isMissingNode()) {
        r.storedCpu(q.path("query").asText(), new BenchResults.CpuFigures(c.path("inputBytes").asLong(),
            c.path("shuffleBytesWritten").asLong()));
      }
    }
    for (JsonNode run : root.path("runs")) {
      JsonNode m = run.path("metrics");
      Map<String, Long> counters = new TreeMap<>();
      run.path("slipstreamExecutorCounters").fields().forEachRemaining(e -> counters.put(e.getKey(),
          e.getValue().asLong()));
      r.add(new BenchResults.Run(run.path("query").asText(), run.path("manager").asText(), run.path("round").asInt(),
          run.path("warmup").asBoolean(), run.path("startEpochMillis").asLong(), run.path("wallMillis").asLong(),
          run.path("rows").asInt(), new QueryMetrics(m.path("tasks").asLong(), m.path("inputBytes").asLong(),
              m.path("shuffleBytesWritten").asLong(), m.path("shuffleBytesRead").asLong(),
              m.path("shuffleRemoteBytesRead").asLong(), m.path("shuffleWriteNanos").asLong(),
              m.path("fetchWaitMillis").asLong(), m.path("peakExecutionMemory").asLong(),
              m.path("peakHeapBytes").asLong(), m.path("peakDirectBytes").asLong(), m.path("stages").asLong(),
              m.path("taskRunMillis").asLong(), m.path("executorsUsed").asLong(),
              m.path("gpuSemaphoreWaitMillis").asLong()), counters));
    }
    return r;
  }

  private static List<String> strings(JsonNode array) {
    List<String> out = new ArrayList<>();
    array.forEach(n -> out.add(n.asText()));
    return out;
  }
}
