package dev.slipstream.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.config.ConfigSource;
import java.util.Map;
import org.junit.jupiter.api.Test;

class GpuConfTest {
  private static GpuConf conf(Map<String, String> m) {
    return new GpuConf(ConfigSource.of(m));
  }

  @Test
  void defaults() {
    GpuConf c = conf(Map.of());
    assertEquals("auto", c.mode());
    assertEquals("gpu", c.resource());
    assertEquals(256L << 20, c.landingBytes());
    assertEquals(1L << 30, c.mapOutputBytes());
    assertEquals(2L << 30, c.hostSpillBytes());
    assertEquals(4, c.serveInFlight());
    assertEquals(2, c.serveThreads());
    assertEquals(java.time.Duration.ofMillis(50), c.serveSpin());
    assertTrue(c.requestRing());
    assertEquals("/dev/shm", c.requestRingDir());
    assertEquals(java.time.Duration.ofMillis(50), c.requestRingPoll());
    assertFalse(conf(Map.of("spark.slipstream.gpu.requestRing", "false")).requestRing());
    assertEquals(java.time.Duration.ZERO, conf(Map.of("spark.slipstream.gpu.serve.spin", "0")).serveSpin());
    assertFalse(c.stagedOnly());
    assertFalse(c.gpunetio());
    assertTrue(conf(Map.of("spark.slipstream.gpu.path", "staged")).stagedOnly());
    GpuConf g = conf(Map.of("spark.slipstream.gpu.path", "gpunetio"));
    assertTrue(g.gpunetio());
    assertFalse(g.stagedOnly());
    assertEquals(16, conf(Map.of("spark.slipstream.gpu.serve.inFlight", "16")).serveInFlight());
    assertTrue(conf(Map.of("spark.slipstream.gpu.mode", "REQUIRE")).required());
    assertTrue(conf(Map.of("spark.slipstream.gpu.mode", "off")).off());
    assertEquals(java.time.Duration.ofSeconds(30), c.retainGrace());
    assertEquals(java.time.Duration.ZERO, conf(Map.of("spark.slipstream.gpu.landing.retainGrace", "0")).retainGrace());
  }

  @Test
  void theGpunetioPathPushesOverGpunetioQueuesOrSaysWhyItCannot() {
    assertEquals(dev.slipstream.gpu.Backend.NVLINK, GpuExecutor.pushBackend(conf(Map.of())));
    GpuConf g = conf(Map.of("spark.slipstream.gpu.path", "gpunetio"));
    String why = dev.slipstream.gpu.GpuRuntime.gpunetioUnavailable();
    if (why == null) {
      assertEquals(dev.slipstream.gpu.Backend.GPUNETIO, GpuExecutor.pushBackend(g));
    } else {
      assertEquals("spark.slipstream.gpu.path=gpunetio, but this build has no gpunetio backend: " + why,
          assertThrows(IllegalStateException.class, () -> GpuExecutor.pushBackend(g)).getMessage());
    }
  }

  @Test
  void badValuesNameTheKeyTheValueAndWhatIsExpected() {
    assertEquals("spark.slipstream.gpu.mode: got 'on', expected one of [auto, off, require]",
        assertThrows(IllegalArgumentException.class, () -> conf(Map.of("spark.slipstream.gpu.mode", "on"))).getMessage());
    assertEquals("spark.slipstream.gpu.landing.bytes: got 4096 bytes, expected at least 1048576",
        assertThrows(IllegalArgumentException.class,
            () -> conf(Map.of("spark.slipstream.gpu.landing.bytes", "4k"))).getMessage());
    assertEquals("spark.slipstream.gpu.nic: got 'mlx5 0', expected auto, none or an RDMA device name such as mlx5_0",
        assertThrows(IllegalArgumentException.class, () -> conf(Map.of("spark.slipstream.gpu.nic", "mlx5 0")))
            .getMessage());
    assertEquals("spark.slipstream.gpu.nic.doorbell: got 'cpu', expected one of [auto, gpu, host]",
        assertThrows(IllegalArgumentException.class, () -> conf(Map.of("spark.slipstream.gpu.nic.doorbell", "cpu")))
            .getMessage());
    assertEquals("spark.slipstream.gpu.path: got 'proxy', expected one of [auto, nvlink, gpunetio, staged]",
        assertThrows(IllegalArgumentException.class,
            () -> conf(Map.of("spark.slipstream.gpu.path", "proxy"))).getMessage(), "the staging path's old name");
    assertEquals("spark.slipstream.gpu.serve.inFlight: got '0', expected an integer in [1, 64]",
        assertThrows(IllegalArgumentException.class,
            () -> conf(Map.of("spark.slipstream.gpu.serve.inFlight", "0"))).getMessage());
    assertEquals("spark.slipstream.gpu.requestRing.dir: got 'shm', expected an absolute path",
        assertThrows(IllegalArgumentException.class,
            () -> conf(Map.of("spark.slipstream.gpu.requestRing.dir", "shm"))).getMessage());
    assertEquals("spark.slipstream.gpu.requestRing.poll: got 5000ms, expected 0 to 1s",
        assertThrows(IllegalArgumentException.class,
            () -> conf(Map.of("spark.slipstream.gpu.requestRing.poll", "5s"))).getMessage());
    assertEquals("spark.slipstream.gpu.serve.spin: got 2000ms, expected 0 to 1s",
        assertThrows(IllegalArgumentException.class,
            () -> conf(Map.of("spark.slipstream.gpu.serve.spin", "2s"))).getMessage());
    assertEquals("spark.slipstream.gpu.landing.retainGrace: got 7200000ms, expected 0 to 1h",
        assertThrows(IllegalArgumentException.class,
            () -> conf(Map.of("spark.slipstream.gpu.landing.retainGrace", "2h"))).getMessage());
    assertEquals("spark.slipstream.gpu.resourceName: got an empty name, expected a Spark resource name such as 'gpu'",
        assertThrows(IllegalArgumentException.class,
            () -> conf(Map.of("spark.slipstream.gpu.resourceName", " "))).getMessage());
  }

  /** Resident serving over gpunetio adds two queue pairs to every link, within the 256 a link may have. */
  @Test
  void residentRingsCountInALinksQueuePairs() {
    Map<String, String> full = Map.of("spark.slipstream.gpu.nic.queues", "128", "spark.slipstream.gpu.serve.inFlight",
        "2", "spark.slipstream.gpu.path", "gpunetio");
    assertEquals(128, conf(full).nicQueues(), "256 queue pairs without resident rings");
    java.util.Map<String, String> resident = new java.util.HashMap<>(full);
    resident.put("spark.slipstream.gpu.serve.resident", "true");
    assertEquals("spark.slipstream.gpu.nic.queues x spark.slipstream.gpu.serve.inFlight: got 128 x 2 = 256 queue pairs"
        + " per gpunetio link and 2 for resident rings, expected at most 256 in all",
        assertThrows(IllegalArgumentException.class, () -> conf(resident)).getMessage());
    resident.put("spark.slipstream.gpu.nic.queues", "127");
    assertEquals(127, conf(resident).nicQueues());
    assertFalse(conf(resident).nicRingsOnly());
    resident.put("spark.slipstream.gpu.serve.resident.rings", "nic");
    assertTrue(conf(resident).nicRingsOnly());
    resident.put("spark.slipstream.gpu.serve.resident.rings", "shm");
    assertEquals("spark.slipstream.gpu.serve.resident.rings: got 'shm', expected one of [auto, nic]",
        assertThrows(IllegalArgumentException.class, () -> conf(resident)).getMessage());
  }

  @Test
  void theNicIsOptionalUnlessNamed() {
    GpuConf d = conf(Map.of());
    assertEquals("auto", d.nic());
    assertEquals(1, d.nicPort());
    assertEquals(0, d.nicGidIndex());
    assertEquals("auto", d.nicDoorbell());
    assertEquals(8, d.nicQueues());
    assertEquals(null, GpuExecutor.openNic(conf(Map.of("spark.slipstream.gpu.nic", "none")), 0, "1"));
    // This machine has no RDMA device: auto means none, a named device is an error naming the key.
    assertEquals(null, GpuExecutor.openNic(d, 0, "1"));
    IllegalStateException named = assertThrows(IllegalStateException.class,
        () -> GpuExecutor.openNic(conf(Map.of("spark.slipstream.gpu.nic", "mlx5_9")), 0, "1"));
    assertTrue(named.getMessage().startsWith("spark.slipstream.gpu.nic=mlx5_9"), named.getMessage());
    String why = dev.slipstream.gpu.NativeNic.unavailable();
    assertTrue(named.getMessage().contains(why == null ? "RDMA device mlx5_9 not found (" : why), named.getMessage());
    // The software NIC needs the gpunetio backend, not rdma-core.
    GpuConf soft = conf(Map.of("spark.slipstream.gpu.nic", "softnic"));
    String noBackend = dev.slipstream.gpu.GpuRuntime.gpunetioUnavailable();
    if (noBackend != null) {
      IllegalStateException e = assertThrows(IllegalStateException.class, () -> GpuExecutor.openNic(soft, 0, "1"));
      assertTrue(e.getMessage().startsWith("spark.slipstream.gpu.nic=softnic, but " + noBackend), e.getMessage());
    } else {
      try (dev.slipstream.gpu.NativeNic n = GpuExecutor.openNic(soft, 0, "1")) {
        assertTrue(n.software(), n.toString());
      }
    }
    assertEquals("spark.slipstream.gpu.nic.queues x spark.slipstream.gpu.serve.inFlight: got 64 x 8 = 512 queue pairs"
        + " per gpunetio link, expected at most 256 in all", assertThrows(IllegalArgumentException.class,
            () -> conf(Map.of("spark.slipstream.gpu.nic.queues", "64", "spark.slipstream.gpu.serve.inFlight", "8")))
            .getMessage());
    assertThrows(IllegalArgumentException.class, () -> conf(Map.of("spark.slipstream.gpu.nic.queues", "1")),
        "a push needs a data queue pair and the table's");
  }

  @Test
  void resourceAddressesAreDeviceOrdinals() {
    assertEquals(1, GpuConf.ordinal("gpu", new String[] {"1", "2"}));
    assertEquals("Spark resource 'gpu': address 'GPU-abc', expected a CUDA device ordinal (0, 1, ...) as"
        + " bin/slipstream-gpu-discover reports",
        assertThrows(IllegalArgumentException.class, () -> GpuConf.ordinal("gpu", new String[] {"GPU-abc"})).getMessage());
    assertEquals("Spark resource 'gpu': no address, expected one GPU ordinal",
        assertThrows(IllegalArgumentException.class, () -> GpuConf.ordinal("gpu", new String[0])).getMessage());
    assertThrows(IllegalArgumentException.class, () -> GpuConf.ordinal("gpu", new String[] {"-1"}));
  }

  @Test
  void partitionerBoundsAndWidthsAreChecked() {
    assertEquals("GPU shuffle: 2001 partitions, expected 1..2000 (above it Spark's map statuses lose the block sizes"
        + " that readers reserve device memory by)",
        assertThrows(IllegalArgumentException.class, () -> new GpuPartitioner(2001, new int[] {8})).getMessage());
    assertEquals("GPU shuffle: payload width 3, expected 1, 2, 4, 8 or 16",
        assertThrows(IllegalArgumentException.class, () -> new GpuPartitioner(4, new int[] {3})).getMessage());
    assertThrows(UnsupportedOperationException.class, () -> new GpuPartitioner(4, new int[] {8}).getPartition(1L));
  }
}
