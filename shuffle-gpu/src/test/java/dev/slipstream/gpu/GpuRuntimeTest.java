package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.Test;

/** The probe: says "no GPU: reason" where there is none (CI), counts GPUs where there are some. */
class GpuRuntimeTest {

  @Test
  void statusNamesMatchTheNativeLibrary() {
    GpuTestSupport.assumeNativeBuilt();
    NativeLibrary.load();
    for (SlipStatus s : SlipStatus.values()) {
      assertEquals(s.name(), SlipNative.nativeStatusName(s.code()));
    }
    assertEquals("SLIP_ERR_UNKNOWN", SlipNative.nativeStatusName(SlipStatus.values().length));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SlipStatus.of(99));
    assertEquals("native status code 99, expected 0..14", e.getMessage());
  }

  @Test
  void withoutAGpuTheProbeSaysWhyAndCallersGetThatReason() {
    GpuProbe p = GpuRuntime.probe();
    assumeFalse(p.available(), "this machine has " + p.reason());
    assertEquals(0, p.deviceCount());
    assertTrue(p.reason().startsWith("no GPU: "), p.reason());
    assertTrue(p.reason().length() > "no GPU: ".length() + 10, "a reason, not just a label: " + p.reason());
    // Where the library is built it loads without a GPU: the reason comes from the CUDA probe.
    String unbuilt = NativeLibrary.unbuiltReason();
    assertTrue(p.reason().contains(unbuilt == null ? "SLIP_ERR_NO_DEVICE" : "built without the GPU binding: " + unbuilt),
        p.reason());
    assertEquals(p, GpuRuntime.probe(), "probed once, same answer");
    GpuException e = assertThrows(GpuException.class, GpuRuntime::require);
    assertEquals(SlipStatus.SLIP_ERR_NO_DEVICE, e.status());
    assertEquals(p.reason(), e.getMessage());
    GpuException open = assertThrows(GpuException.class, () -> GpuContext.open(0));
    assertEquals(p.reason(), open.getMessage());
  }

  @Test
  void withAGpuTheProbeCountsDevices() {
    GpuProbe p = GpuRuntime.probe();
    assumeTrue(p.available(), p.reason());
    assertTrue(p.deviceCount() >= 1);
    assertEquals(p.deviceCount() + " GPU(s)", p.reason());
    GpuException e = assertThrows(GpuException.class, () -> GpuContext.open(p.deviceCount()));
    assertEquals(SlipStatus.SLIP_ERR_INVALID_ARG, e.status());
    assertTrue(e.getMessage().contains("device " + p.deviceCount() + " out of range"), e.getMessage());
  }
}
