package dev.slipstream.bench.tpch;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class QueryMetricsListenerTest {
  /** The shape of RAPIDS' NanoTime: a task's update of its time accumulators. */
  public static final class NanoTimeLike {
    private final Long value;

    NanoTimeLike(long value) {
      this.value = value;
    }

    public Long value() {
      return value;
    }
  }

  @Test
  void rapidsTimeAccumulatorUpdatesReadAsNanoseconds() {
    assertEquals(1_500_000L, QueryMetricsListener.nanos(1_500_000L), "a number");
    assertEquals(2_000_000L, QueryMetricsListener.nanos(new NanoTimeLike(2_000_000L)), "RAPIDS' NanoTime");
    assertEquals(0L, QueryMetricsListener.nanos("12 ms"), "anything else counts nothing");
  }
}
