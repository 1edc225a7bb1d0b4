package dev.slipstream.gpu;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether this process can use the GPU path: loads the JNI library and asks the native
 * {@code slip_cuda_probe()} once. Without a GPU or driver the answer is "no GPU: reason", logged
 * once at INFO, and callers keep to the host path; nothing here throws for a missing GPU.
 *
 * <p>The probe goes through the JNI library (which loads everywhere: its CUDA runtime is static and
 * opens libcuda only when asked), never through JCuda, whose driver binding needs libcuda.so.1 to
 * load at all. JCuda is touched only after a positive probe ({@link CudaDriver}).
 *
 * <p>Threading: any thread. The result is computed once per class loader and immutable.
 */
public final class GpuRuntime {
  private static final Logger LOG = LoggerFactory.getLogger(GpuRuntime.class);

  private GpuRuntime() {}

  /** The probe's answer, computed on first use. */
  public static GpuProbe probe() {
    return Holder.PROBE;
  }

  /** The probe's answer, or an exception with its reason when no GPU is usable. */
  public static GpuProbe require() {
    GpuProbe p = probe();
    if (!p.available()) {
      throw new GpuException(SlipStatus.SLIP_ERR_NO_DEVICE, p.reason());
    }
    return p;
  }

  /**
   * Null when the gpunetio backend is built into this native library (its host side and the
   * kernels' device side, compiled with the GPUNetIO device headers; queue pairs then run against
   * the library's software NIC), else why not. Needs a positive {@link #probe()}.
   */
  public static String gpunetioUnavailable() {
    GpuProbe p = probe();
    return p.available() ? SlipNative.gpunetioUnavailable() : p.reason();
  }

  static GpuProbe compute() {
    try {
      NativeLibrary.load();
    } catch (RuntimeException e) {
      return GpuProbe.none(e.getMessage());
    }
    try {
      return GpuProbe.found(SlipNative.cudaProbe());
    } catch (GpuException e) {
      return GpuProbe.none(e.getMessage());
    }
  }

  private static final class Holder {
    static final GpuProbe PROBE = compute();

    static {
      if (PROBE.available()) {
        LOG.info("Slipstream GPU path: {}", PROBE.reason());
      } else {
        LOG.info("Slipstream GPU path unavailable, using the host path: {}", PROBE.reason());
      }
    }
  }
}
