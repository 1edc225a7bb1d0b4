package dev.slipstream.gpu.shuffle;

import dev.slipstream.gpu.Backend;
import dev.slipstream.gpu.GpuTestSupport;
import dev.slipstream.testkit.ServingConformanceSuite;
import dev.slipstream.testkit.ServingRig;

/**
 * The serving conformance suite for the block writer into device memory over gpunetio push lanes:
 * the push kernel builds DOCA GPUNetIO WQEs for the holder's map outputs and the native library's
 * software NIC executes them into the reader's landing region (one GPU, one process). Skips with
 * the reason without a GPU, or with a native library built without the GPUNetIO device headers.
 */
class GpunetioServingConformanceGpuTest extends ServingConformanceSuite {
  @Override
  protected ServingRig newRig() throws Exception {
    GpuTestSupport.assumeGpunetio();
    return new PushServingConformanceGpuTest.DeviceRig(Backend.GPUNETIO);
  }
}
