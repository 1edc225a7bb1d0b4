package dev.slipstream.gpu.shuffle;

/**
 * How blocks of a GPU shuffle move from one executor to another, decided per pair from the peer
 * table ({@link #between}).
 */
public enum GpuPath {
  /** Both executors on one machine with a GPU each: kernel stores into the peer's GPU memory (CUDA IPC). */
  NVLINK,
  /** Different machines, both with a GPUNetIO NIC: GPU-initiated RDMA. Not built here (no NIC); the hook stays. */
  GPUNETIO,
  /** Both have GPUs but no direct path: the GPU posts descriptors to a host ring and a CPU thread moves the bytes. */
  PROXY,
  /** At least one side has no GPU: host rows over the executor's transport (tcp). */
  HOST;

  /**
   * The path from {@code a} to {@code b}; {@code null} means the executor has no GPU. Same machine
   * (same {@link GpuEndpoint#hostId()}) and different devices or processes: {@link #NVLINK} (CUDA
   * IPC needs one machine; the driver routes over NVLink or PCIe itself); different machines with
   * GPUNetIO on both: {@link #GPUNETIO}; other GPU pairs: {@link #PROXY}.
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
    return PROXY;
  }
}
