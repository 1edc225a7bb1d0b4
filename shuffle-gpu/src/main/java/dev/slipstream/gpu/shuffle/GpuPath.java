package dev.slipstream.gpu.shuffle;

/**
 * How blocks of a GPU shuffle move from one executor to another, decided per pair from the peer
 * table ({@link #between}). A reduce task reads {@link #NVLINK} pairs over the nvlink path and
 * every other pair with GPUs on both sides over the staging path (and every pair over it with
 * {@code spark.slipstream.gpu.path=staged}).
 */
public enum GpuPath {
  /**
   * Both executors on one machine with a GPU each: the holder's push kernel stores the blocks into
   * the reader's device landing region, imported through CUDA IPC.
   */
  NVLINK,
  /**
   * Different machines, both with a GPUNetIO NIC ({@link GpuEndpoint#nic()}): GPU-initiated RDMA.
   * Their executors connect a NIC link (the queue pairs towards each other) when they meet, but the
   * push kernels do not yet post on those links, so a reader reads such a pair over the staging
   * path. Between executors of one machine, {@code spark.slipstream.gpu.path=gpunetio} keeps the
   * {@link #NVLINK} pair's protocol and pushes over gpunetio queue pairs served by the software NIC.
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
    if (a == null || b == null) {
      return HOST;
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
