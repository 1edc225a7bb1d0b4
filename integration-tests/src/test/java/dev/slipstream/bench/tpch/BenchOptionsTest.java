package dev.slipstream.bench.tpch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class BenchOptionsTest {
  @Test
  void cpuModeComparesSlipstreamWithSortEveryRound() {
    BenchOptions o = BenchOptions.parse(new String[] {"--transports", "tcp,loopback"});
    assertFalse(o.gpu());
    assertEquals(List.of("sort", "slipstream-tcp", "slipstream-loopback"), o.managers());
    assertEquals("sort", o.baseline());
    assertEquals(List.of("slipstream-tcp", "slipstream-loopback"), o.compared());
    assertTrue(o.runs("sort", 2));
    assertTrue(BenchOptions.slipstream("slipstream-tcp"));
    assertEquals("loopback", BenchOptions.transport("slipstream-loopback"));
  }

  @Test
  void gpuModeRunsCpuSparkOnceAndComparesWithRapidsOwnManager() {
    BenchOptions o = BenchOptions.parse(new String[] {"--rapids", "r.jar", "--executors", "4", "--conf",
        "spark.rapids.sql.concurrentGpuTasks=1"});
    assertTrue(o.gpu());
    assertEquals(List.of("sort", "rapids-default", "rapids-slipstream-tcp"), o.managers());
    assertEquals("rapids-default", o.baseline());
    assertEquals(List.of("rapids-slipstream-tcp"), o.compared());
    assertTrue(o.runs("sort", 0));
    assertFalse(o.runs("sort", 1));
    assertTrue(o.runs("rapids-default", 1));
    assertTrue(BenchOptions.slipstream("rapids-slipstream-tcp"));
    assertFalse(BenchOptions.slipstream("rapids-default"));
    assertEquals("tcp", BenchOptions.transport("rapids-slipstream-tcp"));
    assertEquals(0.2, o.gpuAllocFraction(), 1e-9, "0.8 shared by 4 executors");
    assertEquals(List.of("spark.rapids.sql.concurrentGpuTasks=1"), o.confs());
    assertEquals(0.4, BenchOptions.parse(new String[] {"--rapids", "r.jar"}).gpuAllocFraction(), 1e-9,
        "at most 0.4 each");
  }

  @Test
  void theGpuPathRunsLastWhenItsIntegrationJarIsGiven() {
    BenchOptions o = BenchOptions.parse(new String[] {"--rapids", "r.jar", "--rapids-gpu", "g.jar"});
    assertEquals(List.of("sort", "rapids-default", "rapids-slipstream-tcp", "rapids-slipstream-gpu"), o.managers());
    assertEquals(List.of("rapids-slipstream-tcp", "rapids-slipstream-gpu"), o.compared());
    assertTrue(BenchOptions.slipstream("rapids-slipstream-gpu"));
    assertEquals("tcp", BenchOptions.transport("rapids-slipstream-gpu"), "its control messages go over tcp");
    assertEquals(List.of("sort", "rapids-default", "rapids-slipstream-gpu"),
        BenchOptions.parse(new String[] {"--rapids", "r.jar", "--rapids-gpu", "g.jar", "--transports", "none"})
            .managers());
  }

  @Test
  void eachGpuCompressionIsAManagerOfItsOwn() {
    BenchOptions o = BenchOptions.parse(new String[] {"--rapids", "r.jar", "--rapids-gpu", "g.jar", "--transports",
        "none", "--gpu-compression", "none,LZ4"});
    assertEquals(List.of("sort", "rapids-default", "rapids-slipstream-gpu", "rapids-slipstream-gpu-lz4"), o.managers());
    assertEquals(List.of("rapids-slipstream-gpu", "rapids-slipstream-gpu-lz4"), o.compared());
    assertTrue(BenchOptions.gpuPath("rapids-slipstream-gpu-lz4"));
    assertEquals("lz4", BenchOptions.gpuCompression("rapids-slipstream-gpu-lz4"));
    assertEquals("none", BenchOptions.gpuCompression("rapids-slipstream-gpu"));
    assertEquals("tcp", BenchOptions.transport("rapids-slipstream-gpu-lz4"));
    assertFalse(BenchOptions.gpuPath("rapids-slipstream-tcp"));
    assertEquals(List.of("sort", "rapids-default", "rapids-slipstream-gpu-lz4"), BenchOptions.parse(new String[] {
        "--rapids", "r.jar", "--rapids-gpu", "g.jar", "--transports", "none", "--gpu-compression", "lz4"}).managers());
  }

  @Test
  void badValuesAreRefusedNamingWhatWasGot() {
    assertEquals("--gpu-compression: got 'zstd', expected a list of [none, lz4]",
        assertThrows(IllegalArgumentException.class, () -> BenchOptions.parse(new String[] {"--rapids", "r.jar",
            "--rapids-gpu", "g.jar", "--gpu-compression", "lz4,zstd"})).getMessage());
    assertEquals("--gpu-compression: lz4 given twice", assertThrows(IllegalArgumentException.class,
        () -> BenchOptions.parse(new String[] {"--rapids", "r.jar", "--rapids-gpu", "g.jar", "--gpu-compression",
            "lz4,lz4"})).getMessage());
    assertEquals("--gpu-compression needs --rapids-gpu JAR (the GPU path)", assertThrows(IllegalArgumentException.class,
        () -> BenchOptions.parse(new String[] {"--rapids", "r.jar", "--gpu-compression", "lz4"})).getMessage());
    assertEquals("--gpu-alloc-fraction: got 1.5, expected a fraction above 0 and at most 1",
        assertThrows(IllegalArgumentException.class,
            () -> BenchOptions.parse(new String[] {"--rapids", "r.jar", "--gpu-alloc-fraction", "1.5"})).getMessage());
    assertEquals("--rapids-natives, --rapids-gpu and --gpu-alloc-fraction need --rapids JAR (the GPU mode)",
        assertThrows(IllegalArgumentException.class,
            () -> BenchOptions.parse(new String[] {"--rapids-natives", "dir"})).getMessage());
    assertThrows(IllegalArgumentException.class, () -> BenchOptions.parse(new String[] {"--rapids-gpu", "g.jar"}));
    assertEquals("--conf: got 'spark.x', expected KEY=VALUE", assertThrows(IllegalArgumentException.class,
        () -> BenchOptions.parse(new String[] {"--conf", "spark.x"})).getMessage());
    assertEquals("--executors: got 'two', expected a whole number", assertThrows(IllegalArgumentException.class,
        () -> BenchOptions.parse(new String[] {"--executors", "two"})).getMessage());
  }
}
