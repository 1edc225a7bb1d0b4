package dev.slipstream.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.gpu.shuffle.BatchLayout;
import dev.slipstream.gpu.shuffle.DeviceBatch;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;

/**
 * The decided behaviour of the GPU shuffle API where executors have no GPU: the map task fails
 * with the reason (no host fallback: device batches only exist on GPU executors); host shuffles of
 * the same job keep working.
 */
class GpuShuffleWithoutGpuTest {
  @Test
  void gpuShuffleOnAnExecutorWithoutAGpuFailsWithTheReasonWhileHostShufflesWork() {
    SparkConf conf = new SparkConf().setMaster("local[2]").setAppName("gpu-without-gpu")
        .set("spark.shuffle.manager", "dev.slipstream.spark.SlipstreamShuffleManager")
        .set("spark.slipstream.transport", "loopback")
        .set("spark.ui.enabled", "false")
        .set("spark.slipstream.landing.bytes", "32m")
        .set("spark.slipstream.mapOutput.memoryBytes", "16m");
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      // A host shuffle in the same job works.
      assertEquals(3, sc.parallelize(List.of(1, 2, 3, 1), 2).distinct(3).count());
      // The batches are never touched: the writer refuses before it reads them.
      JavaRDD<DeviceBatch> batches = sc.parallelize(List.of(1, 2), 2)
          .map(i -> DeviceBatch.view(0, 4096, BatchLayout.packed(1, 8)));
      SparkException e = assertThrows(SparkException.class,
          () -> SlipstreamGpuShuffle.shuffleByKey(batches, 4, 8).count());
      assertTrue(e.getMessage().contains("GPU shuffle on an executor without a GPU: executor driver was assigned no GPU"
          + " (set spark.executor.resource.gpu.amount=1 with a discovery script, and"
          + " spark.plugins=dev.slipstream.spark.gpu.SlipstreamGpuPlugin)"), e.getMessage());
    }
  }
}
