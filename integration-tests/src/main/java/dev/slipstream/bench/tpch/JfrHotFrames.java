package dev.slipstream.bench.tpch;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordingFile;

/**
 * Summarises the CPU samples ({@code jdk.ExecutionSample}) of JFR recordings made with
 * {@code slipstream-bench --jfr DIR}, optionally only those inside a time window (a query's
 * {@code startEpochMillis} and {@code wallMillis} from {@code tpch.json}): samples per thread
 * group, the hottest methods by self samples, and inclusive samples per code area (Slipstream,
 * Netty, Spark shuffle, compression, ...).
 *
 * <p>Usage: {@code JfrHotFrames [--from EPOCH_MS --to EPOCH_MS] [--top N] [--stacks TEXT] FILE.jfr...};
 * {@code --stacks} also prints the commonest 10-frame stacks whose frames mention TEXT.
 */
public final class JfrHotFrames {
  private static final Map<String, String> AREAS = new LinkedHashMap<>();

  static {
    AREAS.put("dev.slipstream.core.transport", "slipstream transport");
    AREAS.put("dev.slipstream.core", "slipstream core (store, fetcher, server)");
    AREAS.put("dev.slipstream.spark", "slipstream spark plugin (writer, reader)");
    AREAS.put("io.netty", "netty");
    AREAS.put("org.apache.spark.shuffle", "spark shuffle");
    AREAS.put("org.apache.spark.storage", "spark storage / block fetch");
    AREAS.put("org.apache.spark.network", "spark network");
    AREAS.put("org.apache.spark.util.collection", "spark collections (sorter, append-only map)");
    AREAS.put("org.apache.spark.serializer", "spark serializer");
    AREAS.put("org.apache.spark.io", "spark compression codec");
    AREAS.put("net.jpountz", "lz4");
    AREAS.put("org.apache.spark.sql.execution.UnsafeRowSerializer", "sql row serializer");
    AREAS.put("org.apache.spark.sql.catalyst.expressions.GeneratedClass", "sql generated code");
    AREAS.put("org.apache.parquet", "parquet");
    AREAS.put("org.apache.spark.sql.execution.datasources", "sql scan");
    AREAS.put("org.apache.spark.unsafe", "spark unsafe (rows, sort)");
    AREAS.put("com.nvidia.spark.rapids.jni.kudo", "rapids kudo serializer");
    AREAS.put("com.nvidia.spark.rapids", "rapids plugin");
    AREAS.put("org.apache.spark.sql.rapids", "rapids plugin (spark side)");
    AREAS.put("ai.rapids.cudf", "cudf");
  }

  private JfrHotFrames() {}

  public static void main(String[] args) throws IOException {
    long from = Long.MIN_VALUE;
    long to = Long.MAX_VALUE;
    int top = 25;
    String stacksOf = null;
    List<Path> files = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--from" -> from = Long.parseLong(args[++i]);
        case "--to" -> to = Long.parseLong(args[++i]);
        case "--top" -> top = Integer.parseInt(args[++i]);
        case "--stacks" -> stacksOf = args[++i];
        default -> files.add(Path.of(args[i]));
      }
    }
    Map<String, Long> self = new HashMap<>();
    Map<String, Long> areas = new HashMap<>();
    Map<String, Long> threads = new HashMap<>();
    Map<String, Long> stacks = new HashMap<>();
    long samples = 0;
    for (Path f : files) {
      for (RecordedEvent e : RecordingFile.readAllEvents(f)) {
        if (!e.getEventType().getName().equals("jdk.ExecutionSample")) {
          continue;
        }
        long t = e.getStartTime().toEpochMilli();
        if (t < from || t > to) {
          continue;
        }
        RecordedStackTrace st = e.getStackTrace();
        if (st == null || st.getFrames().isEmpty()) {
          continue;
        }
        samples++;
        String thread = e.getThread("sampledThread") == null ? "?" : e.getThread("sampledThread").getJavaName();
        threads.merge(threadGroup(thread), 1L, Long::sum);
        List<RecordedFrame> frames = st.getFrames();
        self.merge(name(frames.get(0)), 1L, Long::sum);
        if (stacksOf != null) {
          StringBuilder sb = new StringBuilder();
          for (int k = 0; k < Math.min(10, frames.size()); k++) {
            sb.append("\n          ").append(name(frames.get(k))).append(':').append(frames.get(k).getLineNumber());
          }
          if (sb.toString().contains(stacksOf)) {
            stacks.merge(sb.toString(), 1L, Long::sum);
          }
        }
        Set<String> seen = new HashSet<>();
        for (RecordedFrame fr : frames) {
          String cls = fr.getMethod().getType().getName();
          for (Map.Entry<String, String> a : AREAS.entrySet()) {
            if (cls.startsWith(a.getKey())) {
              if (seen.add(a.getValue())) {
                areas.merge(a.getValue(), 1L, Long::sum);
              }
              break;
            }
          }
        }
      }
    }
    System.out.printf(Locale.ROOT, "%d CPU samples in %d file(s)%s%n", samples, files.size(),
        from == Long.MIN_VALUE ? "" : " between " + Instant.ofEpochMilli(from) + " and " + Instant.ofEpochMilli(to));
    print("samples per thread group", threads, samples, top);
    print("inclusive samples per code area (a sample counts once per area on its stack)", areas, samples, top);
    print("hottest methods (self samples)", self, samples, top);
    if (stacksOf != null) {
      print("commonest stacks mentioning " + stacksOf, stacks, samples, 8);
    }
  }

  private static String threadGroup(String name) {
    return name.replaceAll("[0-9]+", "N");
  }

  private static String name(RecordedFrame f) {
    return f.getMethod().getType().getName() + "." + f.getMethod().getName();
  }

  private static void print(String title, Map<String, Long> m, long total, int top) {
    System.out.println();
    System.out.println(title + ":");
    m.entrySet().stream().sorted(Map.Entry.<String, Long>comparingByValue().reversed()).limit(top)
        .forEach(e -> System.out.printf(Locale.ROOT, "  %6d  %5.1f%%  %s%n", e.getValue(), 100.0 * e.getValue() / total,
            e.getKey()));
  }
}
