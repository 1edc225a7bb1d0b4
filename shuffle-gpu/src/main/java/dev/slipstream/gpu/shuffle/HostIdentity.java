package dev.slipstream.gpu.shuffle;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Which machine (and boot) this process runs on: two executors may use CUDA IPC with each other
 * only when these are equal. A host name alone is not enough (containers share names, names
 * repeat across clusters), so the kernel's boot id is added where Linux has one.
 */
public final class HostIdentity {
  private HostIdentity() {}

  public static String local(String hostName) {
    Path boot = Path.of("/proc/sys/kernel/random/boot_id");
    try {
      return hostName + "/" + Files.readString(boot).trim();
    } catch (IOException | RuntimeException e) {
      return hostName;
    }
  }
}
