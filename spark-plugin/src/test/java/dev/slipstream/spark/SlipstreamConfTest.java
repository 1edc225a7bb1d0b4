package dev.slipstream.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.transport.Transports;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

class SlipstreamConfTest {
  private final Transports transports = Transports.load(null);

  private SlipstreamConf conf(Map<String, String> m) {
    return new SlipstreamConf(ConfigSource.of(m), transports);
  }

  @Test
  void defaultsAreValid() {
    SlipstreamConf c = conf(Map.of());
    assertEquals("tcp", c.transport());
    assertEquals(256L << 20, c.core().mapOutputMemory());
  }

  @Test
  void codecThreadsDefaultsAndLimits() {
    SlipstreamConf c = conf(Map.of());
    assertEquals(0, c.codecThreads());
    assertEquals(16L << 20, c.decodeAheadBytes());
    assertEquals(16L << 20, c.encodeAheadBytes());
    assertEquals(256 * 1024, c.decodeChunkBytes());
    assertEquals(64 * 1024, conf(Map.of("spark.slipstream.reader.decodeAheadBytes", "64k")).decodeChunkBytes(),
        "a budget under one chunk size decodes in chunks of the whole budget");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> conf(Map.of("spark.slipstream.reader.decodeAheadBytes", "4k")));
    assertEquals("spark.slipstream.reader.decodeAheadBytes: got 4096 bytes, expected at least 65536 (64k);"
        + " spark.slipstream.codec.threads=0 runs the codec on the task threads instead", e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> conf(Map.of("spark.slipstream.writer.encodeAheadBytes", "1k")));
    assertTrue(e.getMessage().startsWith("spark.slipstream.writer.encodeAheadBytes: got 1024 bytes"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> conf(Map.of("spark.slipstream.codec.threads", "-1")));
    assertEquals("spark.slipstream.codec.threads: got '-1', expected auto or an integer in [0, 256]", e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> conf(Map.of("spark.slipstream.codec.threads", "many")));
    assertEquals("spark.slipstream.codec.threads: got 'many', expected auto or an integer in [0, 256]", e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> conf(Map.of("spark.slipstream.codec.threads", "257")));
    assertEquals(256, conf(Map.of("spark.slipstream.codec.threads", "256")).codecThreads());
  }

  @Test
  void codecThreadsAutoFollowTheRapidsPluginAndTheTaskSlots() {
    String rapids = "com.nvidia.spark.SQLPlugin";
    assertEquals(0, conf(Map.of("spark.executor.cores", "8")).codecThreads(), "CPU executors keep the codec on their tasks");
    assertEquals(0, conf(Map.of("spark.plugins", "com.nvidia.spark.SQLPluginX", "spark.executor.cores", "8"))
        .codecThreads(), "only RAPIDS' own plugin class counts");
    assertEquals(8, conf(Map.of("spark.plugins", rapids, "spark.executor.cores", "8")).codecThreads());
    assertEquals(8, conf(Map.of("spark.plugins", "dev.slipstream.spark.gpu.SlipstreamGpuPlugin, " + rapids,
        "spark.executor.cores", "8", "spark.slipstream.codec.threads", "AUTO")).codecThreads());
    assertEquals(4, conf(Map.of("spark.plugins", rapids, "spark.executor.cores", "8", "spark.task.cpus", "2"))
        .codecThreads(), "one per task slot");
    assertEquals(32, conf(Map.of("spark.plugins", rapids, "spark.executor.cores", "96")).codecThreads());
    assertEquals(Math.min(32, Runtime.getRuntime().availableProcessors()),
        conf(Map.of("spark.plugins", rapids)).codecThreads(), "without spark.executor.cores: this JVM's processors");
    assertEquals(8, conf(Map.of("spark.plugins", rapids, "spark.master", "local-cluster[2,8,8192]")).codecThreads(),
        "a local-cluster executor has the master's cores per executor");
    assertEquals(6, conf(Map.of("spark.plugins", rapids, "spark.master", "local[6, 3]")).codecThreads());
    assertEquals(2, conf(Map.of("spark.plugins", rapids, "spark.master", "local-cluster[1,8,8192]",
        "spark.executor.cores", "2")).codecThreads(), "spark.executor.cores wins over the master");
    assertEquals(Math.min(32, Runtime.getRuntime().availableProcessors()),
        conf(Map.of("spark.plugins", rapids, "spark.master", "local[*]")).codecThreads());
    assertEquals(Math.min(32, Runtime.getRuntime().availableProcessors()),
        conf(Map.of("spark.plugins", rapids, "spark.master", "local[99999999999]")).codecThreads(),
        "a master Spark would refuse is not parsed here");
    assertEquals(0, conf(Map.of("spark.plugins", rapids, "spark.executor.cores", "8",
        "spark.slipstream.codec.threads", "0")).codecThreads(), "a number set wins over auto");
    assertEquals(3, conf(Map.of("spark.slipstream.codec.threads", "3")).codecThreads());
  }

  @Test
  void unknownTransportFailsListingTheValidNames() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> conf(Map.of("spark.slipstream.transport", "rdma-typo")));
    assertTrue(e.getMessage().contains("spark.slipstream.transport: got 'rdma-typo', expected one of [loopback, tcp]")
        || e.getMessage().contains("expected one of [tcp, loopback]"), e.getMessage());
  }

  @Test
  void badSizeFailsWithKeyValueAndExpectation() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> conf(Map.of("spark.slipstream.landing.bytes", "lots")));
    assertEquals("spark.slipstream.landing.bytes: got 'lots', expected a non-negative size such as 65536, 64k, 4m or 1g",
        e.getMessage());
  }

  @Test
  void inconsistentLimitsFailWithBothValues() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> conf(Map.of("spark.slipstream.landing.bytes", "1m", "spark.slipstream.reader.maxBytesInFlight", "2m",
            "spark.slipstream.reader.maxRequestBytes", "64k")));
    assertTrue(e.getMessage().startsWith("spark.slipstream.reader.maxBytesInFlight: got 2097152, expected between"),
        e.getMessage());
  }

  @Test
  void badDurationFails() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> conf(Map.of("spark.slipstream.reader.fetchTimeout", "soon")));
    assertTrue(e.getMessage().contains("spark.slipstream.reader.fetchTimeout: got 'soon'"), e.getMessage());
  }

  @Test
  void managerConstructionValidatesBeforeSparkStarts() {
    SparkConf sc = new SparkConf(false).set("spark.slipstream.transport", "nope");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new SlipstreamShuffleManager(sc));
    assertTrue(e.getMessage().contains("got 'nope'"), e.getMessage());
  }

  @Test
  void externalShuffleServiceFallsBackToSortWithTheReason() {
    SparkConf sc = new SparkConf(false).set("spark.shuffle.service.enabled", "true");
    SlipstreamShuffleManager m = new SlipstreamShuffleManager(sc);
    try {
      assertTrue(m.isFallback());
      assertTrue(m.shuffleBlockResolver() instanceof org.apache.spark.shuffle.IndexShuffleBlockResolver);
      assertTrue(m.conf().unsupported().get().contains("spark.shuffle.service.enabled=true"));
    } finally {
      m.stop();
    }
  }

  @Test
  void fallbackCanBeAStartUpFailure() {
    SparkConf sc = new SparkConf(false).set("spark.dynamicAllocation.enabled", "true")
        .set("spark.slipstream.fallback", "fail");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new SlipstreamShuffleManager(sc));
    assertTrue(e.getMessage().contains("spark.dynamicAllocation.enabled=true without spark.dynamicAllocation"
        + ".shuffleTracking.enabled=true"), e.getMessage());
    assertTrue(e.getMessage().contains("spark.slipstream.fallback=sort"), e.getMessage());
  }

  @Test
  void dynamicAllocationWithShuffleTrackingIsServed() {
    SlipstreamConf c = conf(Map.of("spark.dynamicAllocation.enabled", "true",
        "spark.dynamicAllocation.shuffleTracking.enabled", "true"));
    assertTrue(c.unsupported().isEmpty());
  }

  @Test
  void unknownFallbackValueListsTheChoices() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> conf(Map.of("spark.slipstream.fallback", "maybe")));
    assertEquals("spark.slipstream.fallback: got 'maybe', expected one of [sort, fail]", e.getMessage());
  }

  @Test
  void networkEncryptionRefusesToStartNamingTheSettingAndTheAlternatives() {
    for (String key : SlipstreamConf.ENCRYPTION_KEYS) {
      SparkConf sc = new SparkConf(false).set("spark.authenticate", "true").set(key, "true");
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new SlipstreamShuffleManager(sc));
      assertTrue(e.getMessage().startsWith(key + "=true: Spark is asked to encrypt its network traffic, but Slipstream's"
          + " tcp transport does not encrypt shuffle blocks and would send them in plaintext"), e.getMessage());
      assertTrue(e.getMessage().contains("Expected " + key + "=false"), e.getMessage());
      assertTrue(e.getMessage().contains("spark.shuffle.manager=sort"), e.getMessage());
    }
  }

  @Test
  void authenticationWithoutEncryptionStarts() {
    SlipstreamConf c = conf(Map.of("spark.authenticate", "true", "spark.network.crypto.enabled", "false",
        "spark.authenticate.enableSaslEncryption", "false"));
    assertEquals("tcp", c.transport());
  }

  @Test
  void loopbackNeverLeavesTheJvmSoEncryptionDoesNotStopIt() {
    SlipstreamConf c = conf(Map.of("spark.slipstream.transport", "loopback", "spark.network.crypto.enabled", "true"));
    assertEquals("loopback", c.transport());
  }
}
