package dev.slipstream.core.shuffle;

/**
 * What a fetcher reports while it runs; the plugin maps it onto Spark's read metrics. Blocks are
 * counted as Spark counts them: a batch block is one block, and so is a block streamed in chunks.
 * Called on the task thread that reads the fetcher.
 */
public interface FetchMetrics {
  /** A block's first bytes landed: one block, {@code bytes} of it. */
  void remoteBlockFetched(long bytes);

  /** Further bytes of a block already counted by {@link #remoteBlockFetched} (its later chunks). */
  default void remoteBytesFetched(long bytes) {}

  void localBlockRead(long bytes);

  void fetchWaitNanos(long nanos);

  FetchMetrics NONE = new FetchMetrics() {
    @Override public void remoteBlockFetched(long bytes) {}
    @Override public void localBlockRead(long bytes) {}
    @Override public void fetchWaitNanos(long nanos) {}
  };
}
