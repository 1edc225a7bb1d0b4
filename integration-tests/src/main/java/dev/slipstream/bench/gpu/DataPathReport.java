package dev.slipstream.bench.gpu;

import dev.slipstream.spark.gpu.GpuReadStats;
import dev.slipstream.spark.gpu.RequestPhases;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;

/**
 * The GPU shuffle's data path as measured inside the reduce tasks ({@link GpuReadStats}, from
 * {@code SlipstreamGpuShuffle.taskReadStats()}): per reducer, the remote bytes pushed into its
 * landing region over the span from its first device write request sent to its last block landed;
 * aggregated over reducers twice: all remote bytes over the union span (first request of any
 * reducer to last block landed of any; {@code System.nanoTime()} is one clock for all executor
 * JVMs of one machine), and all remote bytes over the sum of the reducers' spans (the rate of one
 * reducer at a time). Local blocks (views of this executor's own map outputs) move no bytes and are
 * counted apart.
 */
final class DataPathReport {
  private DataPathReport() {}

  /** One reduce task's read, with its partition, executor and the rows it counted. */
  record Read(int partition, String executor, long rows, long localBytes, long remoteBytes, long remoteBlocks,
              long copiedBlocks, int requests, int peakInFlight, long firstSentNanos, long lastLandedNanos,
              RequestPhases phases) implements Serializable {
    static Read of(int partition, String executor, long rows, Optional<GpuReadStats> stats) {
      GpuReadStats s = stats.orElseThrow(() -> new IllegalStateException("reduce task of partition " + partition
          + " on executor " + executor + ": no GPU read stats (the task did not read through the GPU path)"));
      return new Read(partition, executor, rows, s.localBytes(), s.remoteBytes(), s.remoteBlocks(), s.copiedBlocks(),
          s.requests(), s.peakInFlight(), s.firstSentNanos(), s.lastLandedNanos(), s.phases());
    }

    long spanNanos() {
      return requests == 0 ? 0 : lastLandedNanos - firstSentNanos;
    }
  }

  static final String METHOD = "data path (inside the reduce tasks): remote bytes pushed into the reducer's landing"
      + " region / (last block landed - first device write request sent), System.nanoTime() in the task; aggregate"
      + " = all remote bytes / (last landed of any reducer - first sent of any reducer), and / the sum of the"
      + " reducers' spans; requests: where a device write request's time went, mean per request over all reducers"
      + " (reader and holder System.nanoTime() instants; phases as in RequestPhases)";

  /** The report's lines: one per reducer, then the aggregates. */
  static List<String> lines(List<Read> reads) {
    List<String> out = new ArrayList<>();
    List<Read> sorted = new ArrayList<>(reads);
    sorted.sort(Comparator.comparingInt(Read::partition));
    long remote = 0;
    long local = 0;
    long spans = 0;
    long first = Long.MAX_VALUE;
    long last = Long.MIN_VALUE;
    RequestPhases phases = new RequestPhases();
    for (Read r : sorted) {
      out.add(String.format("  reducer %d (executor %s): %d rows, local %.1f MB, remote %.1f MB in %d blocks"
          + " (%d copied out), %d requests (peak %d in flight), %.3f ms: %s", r.partition(), r.executor(), r.rows(),
          r.localBytes() / 1e6, r.remoteBytes() / 1e6, r.remoteBlocks(), r.copiedBlocks(), r.requests(),
          r.peakInFlight(), r.spanNanos() / 1e6, rate(r.remoteBytes(), r.spanNanos())));
      remote += r.remoteBytes();
      local += r.localBytes();
      phases = phases.plus(r.phases());
      if (r.requests() > 0) {
        spans += r.spanNanos();
        first = Math.min(first, r.firstSentNanos());
        last = Math.max(last, r.lastLandedNanos());
      }
    }
    long union = first == Long.MAX_VALUE ? 0 : last - first;
    out.add(String.format("  aggregate: remote %.1f MB, local %.1f MB; over the union span %.3f ms: %s;"
        + " over the sum of spans %.3f ms: %s", remote / 1e6, local / 1e6, union / 1e6, rate(remote, union),
        spans / 1e6, rate(remote, spans)));
    out.add("  requests: " + phases.describe());
    return out;
  }

  static String rate(long bytes, long nanos) {
    return nanos <= 0 ? "n/a (no remote request)" : String.format("%.2f GB/s", bytes / (double) nanos);
  }
}
