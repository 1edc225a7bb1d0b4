package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.slipstream.bench.LocalCluster;
import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.Transports;
import dev.slipstream.spark.rpc.PeerInfo;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * {@code spark.authenticate=true} with a configured secret on a local cluster of two executor
 * JVMs: the job shuffles through Slipstream over tcp, every transport connection authenticated
 * with Spark's secret, and a process without the secret (or with another) cannot write into an
 * executor's landing memory.
 */
class AuthenticationIT {
  private static final String SECRET = "slipstream-authentication-it-secret";

  @Test
  void jobShufflesThroughSlipstreamWithAuthenticationOnAndStrangersAreRefused() throws Exception {
    SparkSession spark = LocalCluster.start(LocalCluster.builder("authenticated", LocalCluster.SLIPSTREAM, 2)
        .config("spark.authenticate", "true")
        .config("spark.authenticate.secret", SECRET), 2);
    try {
      List<Integer> seeds = new ArrayList<>();
      for (int i = 0; i < 4; i++) {
        seeds.add(i);
      }
      Map<Integer, Long> sums = JavaSparkContext.fromSparkContext(spark.sparkContext()).parallelize(seeds, 4)
          .flatMapToPair(slice -> {
            Thread.sleep(300); // tasks long enough that both executors run map tasks, so blocks cross the transport
            List<Tuple2<Integer, Long>> out = new ArrayList<>();
            // A contiguous quarter of [0, 40000): every map task has every key, so every reduce task
            // reads from both executors. (With i = slice, slice + 4, ... each map had only keys of one
            // residue mod 4, each reduce task needed the maps of one parity only, and when the
            // scheduler put those on one executor, reduce-side locality made every read local: no
            // block crossed the transport, a flake seen before every map emitted every key.)
            for (int i = slice * 10_000; i < (slice + 1) * 10_000; i++) {
              out.add(new Tuple2<>(i % 100, (long) i));
            }
            return out.iterator();
          }).reduceByKey(Long::sum, 6).collectAsMap();
      assertEquals(100, sums.size());
      for (int k = 0; k < 100; k++) {
        long expected = 0;
        for (int i = k; i < 40_000; i += 100) {
          expected += i;
        }
        assertEquals(expected, sums.get(k), "sum of key " + k);
      }

      Map<String, Map<String, Long>> m = LocalCluster.executorMetrics();
      assertEquals(2, m.size(), "executors: " + m.keySet());
      assertTrue(LocalCluster.executorSum("requests.served") > 0, "no block went through the transport: " + m);
      assertTrue(LocalCluster.executorSum("transport.authenticated") > 0, "no authenticated connection: " + m);
      assertEquals(0, LocalCluster.executorSum("transport.authFailures"), "authentication failures: " + m);

      PeerInfo executor = LocalCluster.manager().driverEndpoint().peers().values().iterator().next();
      for (Optional<byte[]> secret : List.of(Optional.<byte[]>empty(),
          Optional.of("not-the-secret".getBytes(StandardCharsets.UTF_8)))) {
        TransportException e = writeAsStranger(secret, executor);
        assertEquals(TransportError.AUTH_FAILED, e.error(), e.getMessage());
        assertFalse(e.getMessage().contains(SECRET), "the message shows the secret: " + e.getMessage());
      }
      // The executor counts the second refusal when the stranger leaves after its challenge: asynchronously.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      long failures;
      while ((failures = LocalCluster.executorSum("transport.authFailures")) < 2 && System.nanoTime() < deadline) {
        Thread.sleep(100);
      }
      assertEquals(2, failures, "authentication failures counted by the executors");
    } finally {
      spark.stop();
    }
  }

  /** A transport of this (driver) JVM with {@code secret} tries one write into {@code executor}'s memory. */
  private static TransportException writeAsStranger(Optional<byte[]> secret, PeerInfo executor) throws Exception {
    try (Transport t = Transports.load(null).create("tcp",
        new TransportContext(ConfigSource.empty(), "127.0.0.1", "stranger", secret))) {
      PeerQueue q = t.connect(executor.endpoint());
      try {
        // No landing descriptor is published: the stranger guesses one (refused before any region check).
        q.write(ByteBuffer.wrap(new byte[] {1, 2, 3, 4}),
            dev.slipstream.core.transport.RegionDescriptor.host(1, 4096, 0x5eedL).at(0)).get(60, TimeUnit.SECONDS);
      } catch (ExecutionException e) {
        return assertInstanceOf(TransportException.class, e.getCause());
      }
      return fail("a stranger " + (secret.isPresent() ? "with a wrong secret" : "without a secret")
          + " wrote into executor " + executor.executorId() + "'s landing region");
    }
  }
}
