package dev.slipstream.gpu.shuffle;

/**
 * How blocks of a GPU shuffle move from one executor to another, decided per pair from the peer
 * table ({@link #between}). A reduce task reads {@link #NVLINK} pairs and {@link #GPUNETIO} pairs
 * with a connected NIC link over push paths (the holder's GPU writes into the reader's device
 * landing region) and every other pair with GPUs on both sides over the staging path (and every
 * pair over it with {@code spark.slipstream.gpu.path=staged}).
 */
public enum GpuPath {
  /**
   * Both executors on one machine with a GPU each: the holder's push kernel stores the blocks into
   * the reader's device landing region, imported through CUDA IPC.
   */
  NVLINK,
  /**
   * Both with a GPUNetIO NIC ({@link GpuEndpoint#nic()}), on different machines (or, with
   * {@code spark.slipstream.gpu.path=gpunetio}, on any): GPU-initiated RDMA. Their executors
   * connect a NIC link (the queue pairs towards each other) when they meet; the holder's push
   * kernel posts RDMA writes of the blocks, and then a fetch-add on the request's signal, on a slot
   * of that link, into the reader's landing region as its NIC registered it.
   */
  GPUNETIO,
  /**
   * Both have GPUs but no direct device path (different machines): device-to-host staging. The
   * holder copies the requested blocks from device memory into host memory and writes them over
   * the executor's transport into the reader's host landing region; the reader copies each one to
   * its GPU ({@link StagedBlocks}).
   */
  STAGED,
  /** At least one side has no GPU (or is unknown): no GPU path; a GPU shuffle's fetch from such a holder fails. */
  HOST;

  /**
   * The path from {@code a} to {@code b}; {@code null} means the executor has no GPU. Same machine
   * (same {@link GpuEndpoint#hostId()}) and different devices or processes: {@link #NVLINK} (CUDA
   * IPC needs one machine; the driver routes over NVLink or PCIe itself); different machines with
   * GPUNetIO on both: {@link #GPUNETIO}; other GPU pairs: {@link #STAGED}.
   */
  public static GpuPath between(GpuEndpoint a, GpuEndpoint b) {
    return between(a, b, false);
  }

  /**
   * As {@link #between(GpuEndpoint, GpuEndpoint)}; {@code preferGpunetio}
   * ({@code spark.slipstream.gpu.path=gpunetio}): {@link #GPUNETIO} whenever both have a NIC, on one
   * machine too.
   */
  public static GpuPath between(GpuEndpoint a, GpuEndpoint b, boolean preferGpunetio) {
    if (a == null || b == null) {
      return HOST;
    }
    if (preferGpunetio && a.gpunetio() && b.gpunetio()) {
      return GPUNETIO;
    }
    if (a.hostId().equals(b.hostId())) {
      return NVLINK;
    }
    if (a.gpunetio() && b.gpunetio()) {
      return GPUNETIO;
    }
    return STAGED;
  }
}
