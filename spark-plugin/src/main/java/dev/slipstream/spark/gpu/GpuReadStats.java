package dev.slipstream.spark.gpu;

/**
 * What one reduce task's GPU shuffle read moved, measured inside the task: local blocks (on this
 * executor's device), remote blocks pushed into its landing region by their holders and how many of
 * those were copied out of it rather than handed out as views, the device
 * write requests that carried them, the most that were in flight at once, and the span of the
 * remote data path: from the first request sent ({@link System#nanoTime()}) to the last block
 * landed (its signal seen complete). The data-path throughput is remote bytes over that span.
 * {@link RequestPhases} breaks the requests' time down (reader and holder instants); it is the
 * reader's live record, since a request's timeline arrives with the holder's answer, which may
 * follow the data: {@link #phases()} is a snapshot.
 *
 * <p>Immutable but for {@code phases}, which only grows. {@code System.nanoTime()} is CLOCK_MONOTONIC on Linux, one clock for every process
 * of a machine, so spans of executors on one host can be compared.
 */
public record GpuReadStats(long localBlocks, long localBytes, long remoteBlocks, long remoteBytes, long copiedBlocks,
                           int requests, int peakInFlight, long firstSentNanos, long lastLandedNanos,
                           RequestPhases phases) {
  public GpuReadStats(long localBlocks, long localBytes, long remoteBlocks, long remoteBytes, long copiedBlocks,
      int requests, int peakInFlight, long firstSentNanos, long lastLandedNanos) {
    this(localBlocks, localBytes, remoteBlocks, remoteBytes, copiedBlocks, requests, peakInFlight, firstSentNanos,
        lastLandedNanos, new RequestPhases());
  }

  public GpuReadStats {
    if (localBlocks < 0 || localBytes < 0 || remoteBlocks < 0 || remoteBytes < 0 || copiedBlocks < 0 || requests < 0
        || peakInFlight < 0) {
      throw new IllegalArgumentException("GPU read stats: negative count (" + localBlocks + " local blocks, "
          + localBytes + " bytes, " + remoteBlocks + " remote blocks, " + remoteBytes + " bytes, " + copiedBlocks
          + " copied, " + requests + " requests, " + peakInFlight + " in flight), expected >= 0");
    }
    if (copiedBlocks > remoteBlocks) {
      throw new IllegalArgumentException("GPU read stats: " + copiedBlocks + " blocks copied out of the landing region,"
          + " expected at most the " + remoteBlocks + " remote blocks");
    }
    if (requests > 0 && lastLandedNanos - firstSentNanos < 0) {
      throw new IllegalArgumentException("GPU read stats: last block landed at " + lastLandedNanos
          + " ns, before the first request was sent at " + firstSentNanos + " ns");
    }
  }

  @Override
  public RequestPhases phases() {
    return phases.snapshot();
  }

  /** Nanoseconds from the first request sent to the last block landed; 0 without requests. */
  public long remoteNanos() {
    return requests == 0 ? 0 : lastLandedNanos - firstSentNanos;
  }

  /** Remote bytes per second over {@link #remoteNanos()}; 0 without requests. */
  public double remoteBytesPerSecond() {
    long ns = remoteNanos();
    return ns == 0 ? 0 : remoteBytes * 1e9 / ns;
  }
}
