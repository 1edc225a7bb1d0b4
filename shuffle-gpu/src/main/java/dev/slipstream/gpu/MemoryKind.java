package dev.slipstream.gpu;

/** Where a registered region lives ({@code SLIP_MEM_*}). */
public enum MemoryKind {
  /** Device memory, exported to peers with a CUDA IPC handle. */
  DEVICE(1),
  /** POSIX shared memory pinned with cudaHostRegister in each process that maps it. */
  HOST_SHM(2);

  private final int code;

  MemoryKind(int code) {
    this.code = code;
  }

  public int code() {
    return code;
  }

  /** The kind for a wire code; fails naming the code got and the codes expected. */
  public static MemoryKind of(int code) {
    for (MemoryKind k : values()) {
      if (k.code == code) {
        return k;
      }
    }
    throw new IllegalArgumentException("memory kind " + code + ", expected 1 (device) or 2 (host shm)");
  }
}
