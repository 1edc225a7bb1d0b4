package dev.slipstream.gpu;

/** Queue backends of the device write API ({@code SLIP_BACKEND_*}). */
public enum Backend {
  /** Stores into peer GPU memory of another process on the same host, mapped through CUDA IPC. */
  NVLINK(1),
  /**
   * Descriptors in a pinned host ring, executed by a CPU thread of the native library (not the
   * GPU shuffle's staging path, {@code GpuPath.STAGED}, which copies through the host transport).
   */
  PROXY(2),
  /**
   * GPU-initiated RDMA through DOCA GPUNetIO's device functions: the push kernel builds the WQEs and
   * rings the doorbell once per batch. The native library builds queue sets of this backend only
   * when it was built with the GPUNetIO device headers (its kernels are then compiled with them too:
   * {@link GpuRuntime#gpunetioUnavailable()}), and they run against its software NIC (CPU threads
   * that do what the ConnectX NIC would; native/README.md), never a real NIC here; built without
   * the headers, it refuses them with {@code SLIP_ERR_UNSUPPORTED} and the reason.
   */
  GPUNETIO(3);

  private final int code;

  Backend(int code) {
    this.code = code;
  }

  public int code() {
    return code;
  }
}
