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
   * GPU-initiated RDMA through DOCA GPUNetIO's device functions. The native library builds queue
   * sets of this backend only when it was built with the GPUNetIO device headers, and they then run
   * against its software NIC (a CPU thread that does what the ConnectX NIC would; native/README.md),
   * never a real NIC; built without the headers, it refuses them with {@code SLIP_ERR_UNSUPPORTED}
   * and the reason. The push kernel that Java launches ({@link PushKernel}) is compiled without
   * those headers, so its pushes over such a set end with {@code SLIP_ERR_UNSUPPORTED}; the GPU
   * shuffle makes no such set.
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
