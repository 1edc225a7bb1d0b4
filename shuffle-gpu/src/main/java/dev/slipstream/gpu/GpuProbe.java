package dev.slipstream.gpu;

import java.util.Objects;

/**
 * What {@link GpuRuntime#probe()} found: the number of usable GPUs, or none and the reason
 * ("no GPU: ..."), so callers stay on the host path and can say why.
 */
public record GpuProbe(int deviceCount, String reason) {

  public GpuProbe {
    Objects.requireNonNull(reason, "reason");
    if (deviceCount < 0) {
      throw new IllegalArgumentException("device count " + deviceCount + ", expected >= 0");
    }
  }

  public boolean available() {
    return deviceCount > 0;
  }

  static GpuProbe found(int devices) {
    return new GpuProbe(devices, devices + " GPU(s)");
  }

  static GpuProbe none(String why) {
    return new GpuProbe(0, "no GPU: " + why);
  }
}
