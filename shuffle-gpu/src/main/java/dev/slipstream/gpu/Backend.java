package dev.slipstream.gpu;

/** Queue backends of the device write API ({@code SLIP_BACKEND_*}). */
public enum Backend {
  /** Stores into peer GPU memory of another process on the same host, mapped through CUDA IPC. */
  NVLINK(1),
  /** Descriptors in a pinned host ring, executed by a CPU thread of the native library. */
  PROXY(2),
  /** GPU-initiated RDMA through DOCA GPUNetIO (not built yet: queue sets answer UNSUPPORTED). */
  GPUNETIO(3);

  private final int code;

  Backend(int code) {
    this.code = code;
  }

  public int code() {
    return code;
  }
}
