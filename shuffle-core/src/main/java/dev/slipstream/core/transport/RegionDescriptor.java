package dev.slipstream.core.transport;

import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.util.Objects;

/**
 * What a peer needs to write into a registered region: its id, base address (the native address
 * for RDMA/GPU memory, 0 where the transport addresses by offset), length, access key, memory
 * kind and device.
 */
public record RegionDescriptor(long id, long base, long length, long key, MemoryKind kind, int deviceId) {

  /** Encoded size in bytes: id, base, length, key (8 each), kind (1), device (4). */
  public static final int ENCODED_LENGTH = 8 * 4 + 1 + 4;

  public RegionDescriptor {
    Objects.requireNonNull(kind, "kind");
    if (length < 0) {
      throw new IllegalArgumentException("region length " + length + " is negative");
    }
  }

  public static RegionDescriptor host(long id, long length, long key) {
    return new RegionDescriptor(id, 0L, length, key, MemoryKind.HOST, -1);
  }

  public RemoteAddress at(long offset) {
    return new RemoteAddress(this, offset);
  }

  public void encode(WireWriter out) {
    out.putLong(id).putLong(base).putLong(length).putLong(key).putByte(kind.wireId()).putInt(deviceId);
  }

  public static RegionDescriptor decode(WireReader in) throws TransportException {
    long id = in.getLong("region id");
    long base = in.getLong("region base");
    long length = in.getLong("region length");
    long key = in.getLong("region key");
    MemoryKind kind = MemoryKind.fromWireId(in.getByte("memory kind"));
    int device = in.getInt("device id");
    if (length < 0) {
      throw new TransportException(TransportError.MALFORMED,
          "region " + id + " length " + length + " is negative, expected >= 0");
    }
    return new RegionDescriptor(id, base, length, key, kind, device);
  }

  /** Standalone encoding with magic, version and type, for carrying in RPC messages. */
  public byte[] toBytes() {
    WireWriter w = new WireWriter(WireWriter.HEADER_LENGTH + ENCODED_LENGTH);
    w.putHeader(WireWriter.TYPE_REGION);
    encode(w);
    return w.toByteArray();
  }

  /**
   * Decodes {@link #toBytes()}.
   *
   * @throws TransportException MALFORMED (truncated, trailing bytes, bad field), BAD_VERSION
   *     (magic or version), UNKNOWN_TYPE (another encoding's type id)
   */
  public static RegionDescriptor fromBytes(byte[] bytes) throws TransportException {
    WireReader r = new WireReader(bytes);
    r.expectHeader(WireWriter.TYPE_REGION, "region descriptor");
    RegionDescriptor d = decode(r);
    r.expectEnd("region descriptor");
    return d;
  }

  @Override
  public String toString() {
    return "region " + id + " (" + kind.name().toLowerCase() + (deviceId >= 0 ? " " + deviceId : "")
        + ", length " + length + ")";
  }
}
