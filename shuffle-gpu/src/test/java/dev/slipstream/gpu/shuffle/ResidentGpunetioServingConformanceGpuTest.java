package dev.slipstream.gpu.shuffle;

import dev.slipstream.gpu.Backend;
import dev.slipstream.gpu.GpuTestSupport;
import dev.slipstream.testkit.ServingConformanceSuite;
import dev.slipstream.testkit.ServingRig;

/**
 * The serving conformance suite for the resident serving kernel with its reader pushed to over
 * gpunetio: the kernel posts RDMA writes of the blocks, the block table and the signal's fetch-add
 * on a queue pair that the native library's software NIC executes into the reader's landing region
 * (one GPU, one process; the host-driven fallback's push lanes are gpunetio too). Skips with the
 * reason without a GPU, or with a native library built without the GPUNetIO device headers.
 */
class ResidentGpunetioServingConformanceGpuTest extends ServingConformanceSuite {
  @Override
  protected ServingRig newRig() throws Exception {
    GpuTestSupport.assumeGpunetio();
    return new ResidentServingConformanceGpuTest.ResidentRig(Backend.GPUNETIO);
  }
}
