package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.bench.LocalCluster;
import dev.slipstream.bench.Workloads;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;

/**
 * With a small map-output budget the output spills to local disk and jobs still finish; the
 * landing pool bounds what readers hold; ten concurrent shuffling jobs under a small executor
 * memory finish without running out of memory.
 */
class MemoryPressureIT {
  @Test
  void smallBudgetsSpillAndTenConcurrentJobsFinish() throws Exception {
    SparkSession spark = LocalCluster.start(LocalCluster.builder("memory", LocalCluster.SLIPSTREAM, 2)
        .config("spark.executor.memory", "512m")
        .config("spark.slipstream.mapOutput.memoryBytes", "1m")
        .config("spark.slipstream.mapOutput.segmentBytes", "256k")
        .config("spark.slipstream.landing.bytes", "1m")
        .config("spark.slipstream.reader.maxRequestBytes", "64k")
        .config("spark.slipstream.reader.maxBytesInFlight", "256k")
        .config("spark.slipstream.codec.threads", "2"), 2);
    try {
      List<String> expected = Workloads.groupByKey(spark);
      ExecutorService pool = Executors.newFixedThreadPool(10);
      List<Future<List<String>>> jobs = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        jobs.add(pool.submit(() -> Workloads.groupByKey(spark)));
      }
      for (Future<List<String>> f : jobs) {
        assertEquals(expected, f.get(300, TimeUnit.SECONDS));
      }
      pool.shutdown();
      Map<String, Map<String, Long>> m = LocalCluster.executorMetrics();
      long spills = m.values().stream().mapToLong(v -> v.get("mapOutput.spills")).sum();
      assertTrue(spills > 0, "map output beyond the 1 MiB budget spilled to disk: " + m);
      long ahead = m.values().stream().mapToLong(v -> v.get("reader.bytesDecodedAhead")).sum();
      assertTrue(ahead > 0, "the codec threads decoded blocks ahead of the readers: " + m);
      long encoded = m.values().stream().mapToLong(v -> v.get("writer.bytesEncodedAhead")).sum();
      assertTrue(encoded > 0, "the codec threads encoded map tasks' bytes: " + m);
      m.forEach((id, v) -> assertTrue(v.get("memory.landingPeak") <= v.get("memory.landingBytes"),
          "executor " + id + " held at most its landing pool: " + v));
    } finally {
      spark.stop();
    }
  }
}
