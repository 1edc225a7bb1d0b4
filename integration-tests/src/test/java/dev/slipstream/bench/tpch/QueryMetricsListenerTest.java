package dev.slipstream.bench.tpch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.SparkListenerTaskStart;

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

  @Test
  void aTaskThatOutlivesItsQueryIsWaitedFor() throws Exception {
    QueryMetricsListener l = new QueryMetricsListener();
    l.begin();
    assertFalse(l.awaitStragglers(10_000), "no stage failed and no task runs: nothing to wait for");
    l.onTaskStart(new SparkListenerTaskStart(3, 0, null));
    Thread late = new Thread(() -> {
      try {
        Thread.sleep(200);
      } catch (InterruptedException e) {
        return;
      }
      l.onTaskEnd(new SparkListenerTaskEnd(3, 0, "ShuffleMapTask", org.apache.spark.Success$.MODULE$, null, null, null));
    });
    late.start();
    assertTrue(l.awaitStragglers(10_000), "a task was still running");
    assertEquals(0, l.running(), "returned only once the task had ended");
    late.join();
  }
}
