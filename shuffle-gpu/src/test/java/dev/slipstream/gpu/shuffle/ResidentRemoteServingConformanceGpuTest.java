package dev.slipstream.gpu.shuffle;

import dev.slipstream.gpu.GpuTestSupport;
import dev.slipstream.testkit.ServingConformanceSuite;
import dev.slipstream.testkit.ServingRig;

/**
 * The serving conformance suite for the resident serving kernel serving a reader on another
 * machine: two software NICs in one process, linked to each other, stand for the two machines' NICs.
 * The reader writes each request into its own copy of the ring and publishes it into the holder's
 * copy with an RDMA write and a fetch-add from the host; the kernel posts the blocks, the table, the
 * signal and its answer into the reader's landing region and copy of the ring over the holder's link.
 * Skips with the reason without a GPU, or with a native library built without the GPUNetIO device
 * headers.
 */
class ResidentRemoteServingConformanceGpuTest extends ServingConformanceSuite {
  @Override
  protected ServingRig newRig() throws Exception {
    GpuTestSupport.assumeGpunetio();
    return ResidentServingConformanceGpuTest.ResidentRig.remote();
  }
}
