package dev.slipstream.spark;

import org.apache.spark.ShuffleDependency;
import org.apache.spark.shuffle.BaseShuffleHandle;

/** The handle every task of a Slipstream shuffle receives; peers are already known, so it needs nothing more yet. */
public final class SlipstreamShuffleHandle<K, V, C> extends BaseShuffleHandle<K, V, C> {
  private static final long serialVersionUID = 1L;

  public SlipstreamShuffleHandle(int shuffleId, ShuffleDependency<K, V, C> dependency) {
    super(shuffleId, dependency);
  }
}
