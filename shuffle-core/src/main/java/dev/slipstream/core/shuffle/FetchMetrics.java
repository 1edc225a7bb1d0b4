package dev.slipstream.core.shuffle;

/** What a fetcher reports while it runs; the plugin maps it onto Spark's read metrics. */
public interface FetchMetrics {
  void remoteBlockFetched(long bytes);

  void localBlockRead(long bytes);

  void fetchWaitNanos(long nanos);

  FetchMetrics NONE = new FetchMetrics() {
    @Override public void remoteBlockFetched(long bytes) {}
    @Override public void localBlockRead(long bytes) {}
    @Override public void fetchWaitNanos(long nanos) {}
  };
}
