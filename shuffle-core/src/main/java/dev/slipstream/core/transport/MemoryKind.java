package dev.slipstream.core.transport;

/**
 * Where registered memory lives, for every mechanism (transport regions, CUDA IPC exports). Wire
 * ids are stable and equal the native {@code SLIP_MEM_*} values of {@code slipstream/abi.h}.
 */
public enum MemoryKind {
  /** Host memory of one process. */
  HOST((byte) 1),
  /** Device memory (cuMemAlloc), exported to peers of one machine with a CUDA IPC handle. */
  DEVICE((byte) 2),
  /** POSIX shared memory, pinned with cudaHostRegister in each process that maps it. */
  HOST_SHARED((byte) 3);

  private final byte wireId;

  MemoryKind(byte wireId) {
    this.wireId = wireId;
  }

  public byte wireId() {
    return wireId;
  }

  public static MemoryKind fromWireId(byte id) throws TransportException {
    for (MemoryKind k : values()) {
      if (k.wireId == id) {
        return k;
      }
    }
    throw new TransportException(TransportError.MALFORMED,
        "unknown memory kind id " + id + ", expected 1 (host), 2 (device) or 3 (host shared memory)");
  }
}
