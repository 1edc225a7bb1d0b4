package dev.slipstream.core.transport;

/** Where registered memory lives. Wire ids are stable. */
public enum MemoryKind {
  HOST((byte) 1),
  DEVICE((byte) 2);

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
        "unknown memory kind id " + id + ", expected 1 (host) or 2 (device)");
  }
}
