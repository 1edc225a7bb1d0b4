package dev.slipstream.bench.tpch;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/**
 * The machine a benchmark ran on, read from the JVM and {@code /proc} (absent fields are
 * "unknown"): cores, CPU model, memory, Java and OS, and the load average before and after.
 */
public record Machine(int cores, String cpu, long memoryBytes, String java, String os) {
  /** The 1, 5 and 15 minute load averages. */
  public record Load(double one, double five, double fifteen) {
    @Override
    public String toString() {
      return String.format(Locale.ROOT, "%.2f %.2f %.2f", one, five, fifteen);
    }
  }

  public static Machine probe() {
    String cpu = "unknown";
    long mem = -1;
    try {
      cpu = Files.readAllLines(Path.of("/proc/cpuinfo")).stream().filter(l -> l.startsWith("model name"))
          .map(l -> l.substring(l.indexOf(':') + 1).trim()).findFirst().orElse("unknown");
      mem = Files.readAllLines(Path.of("/proc/meminfo")).stream().filter(l -> l.startsWith("MemTotal:"))
          .map(l -> Long.parseLong(l.replaceAll("[^0-9]", "")) * 1024).findFirst().orElse(-1L);
    } catch (IOException | RuntimeException e) {
      // not Linux: keep "unknown"
    }
    return new Machine(Runtime.getRuntime().availableProcessors(), cpu, mem,
        System.getProperty("java.vm.name") + " " + System.getProperty("java.version"),
        System.getProperty("os.name") + " " + System.getProperty("os.version"));
  }

  public static Load load() {
    try {
      List<String> f = List.of(Files.readString(Path.of("/proc/loadavg")).trim().split("\\s+"));
      return new Load(Double.parseDouble(f.get(0)), Double.parseDouble(f.get(1)), Double.parseDouble(f.get(2)));
    } catch (IOException | RuntimeException e) {
      return new Load(-1, -1, -1);
    }
  }

  public String summary() {
    return String.format(Locale.ROOT, "%d cores (%s), %.1f GiB, %s, %s, load %s", cores, cpu,
        memoryBytes / (1024.0 * 1024 * 1024), java, os, load());
  }
}
