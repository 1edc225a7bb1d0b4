package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Shared by the GPU tests: the skip with the probe's reason, and a byte pattern both JVMs compute. */
public final class GpuTestSupport {
  private GpuTestSupport() {}

  /** Skips the calling test, with the reason, unless a GPU is usable. */
  public static GpuProbe assumeGpu() {
    GpuProbe p = GpuRuntime.probe();
    assumeTrue(p.available(), p.reason());
    return p;
  }

  /**
   * Skips the calling test, with the reason, unless a GPU is usable and the native library has the
   * gpunetio backend (built with the GPUNetIO device headers).
   */
  public static void assumeGpunetio() {
    assumeGpu();
    String why = GpuRuntime.gpunetioUnavailable();
    assumeTrue(why == null, why);
  }

  /**
   * Skips the calling test, with the reason, when the jar was built without the GPU binding (no
   * CUDA toolkit at build time: native/build-jni.sh writes why). CI builds it, so there these run.
   */
  static void assumeNativeBuilt() {
    String unbuilt = NativeLibrary.unbuiltReason();
    assumeTrue(unbuilt == null, () -> "built without the GPU binding: " + unbuilt);
  }

  /** The source byte at offset {@code i}: deterministic, and different for nearby offsets. */
  static byte pattern(long i) {
    return (byte) (i * 131 + 7 ^ (i >>> 11));
  }

  static byte[] pattern(long from, int len) {
    byte[] b = new byte[len];
    for (int i = 0; i < len; i++) {
      b[i] = pattern(from + i);
    }
    return b;
  }

  /** SLIP_SIGNAL_PACK(blocks, bytes): 24-bit block count above a 40-bit byte count. */
  static long signal(long blocks, long bytes) {
    return (blocks << 40) | (bytes & ((1L << 40) - 1));
  }
}
