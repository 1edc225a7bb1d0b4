package dev.slipstream.gpu.nic;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * The connection record of one queue pair of a gpunetio NIC link: what a peer needs to move its
 * queue pair from RESET to RTS against this one. The native library's {@code slip_nic_qp_info}
 * (slipstream/gpunetio_nic.h), 64 bytes little-endian: magic "SLPQ", version, address type (IB:
 * LID routed, RoCE: GID routed), queue pair number (24 bits), LID (16 bits, IB), GID (16 bytes),
 * path MTU (the verbs enum, 1..5 for 256..4096 bytes), first packet sequence number (24 bits),
 * 24 reserved zero bytes. {@link #decode} checks each field as the native parser does and names
 * what was got and what was expected. Immutable.
 */
public record NicQpRecord(AddressType addressType, int qpn, int lid, byte[] gid, int mtu, int psn) {
  public static final int BYTES = 64;
  public static final int MAGIC = 0x51504C53;
  public static final short VERSION = 2;
  private static final int RESERVED_AT = 40;

  /** How the peer's port is addressed. */
  public enum AddressType {
    IB,
    ROCE
  }

  public NicQpRecord {
    if (addressType == null) {
      throw new IllegalArgumentException("queue-pair record: address type null, expected IB or ROCE");
    }
    if (qpn <= 0 || qpn > 0xffffff) {
      throw new IllegalArgumentException("queue-pair record: queue-pair number " + Integer.toUnsignedString(qpn)
          + ", expected 1..0xffffff");
    }
    if (addressType == AddressType.IB && (lid <= 0 || lid > 0xffff)) {
      throw new IllegalArgumentException("queue-pair record: IB LID " + Integer.toUnsignedString(lid)
          + ", expected 1..0xffff");
    }
    if (lid < 0 || lid > 0xffff) {
      throw new IllegalArgumentException("queue-pair record: LID " + Integer.toUnsignedString(lid)
          + ", expected 0..0xffff");
    }
    if (gid == null || gid.length != 16) {
      throw new IllegalArgumentException("queue-pair record: GID of " + (gid == null ? "null" : gid.length + " bytes")
          + ", expected 16 bytes");
    }
    if (mtu < 1 || mtu > 5) {
      throw new IllegalArgumentException("queue-pair record: path MTU code " + mtu
          + ", expected 1..5 (256 to 4096 bytes)");
    }
    if (psn < 0 || psn > 0xffffff) {
      throw new IllegalArgumentException("queue-pair record: packet sequence number 0x" + Integer.toHexString(psn)
          + ", expected 24 bits");
    }
    gid = gid.clone();
  }

  @Override
  public byte[] gid() {
    return gid.clone();
  }

  public byte[] encode() {
    ByteBuffer b = ByteBuffer.allocate(BYTES).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(MAGIC).putShort(VERSION).putShort((short) addressType.ordinal()).putInt(qpn).putInt(lid).put(gid)
        .putInt(mtu).putInt(psn);
    return b.array();
  }

  public static NicQpRecord decode(byte[] bytes) throws TransportException {
    if (bytes == null || bytes.length != BYTES) {
      throw new TransportException(TransportError.MALFORMED, "queue-pair record of "
          + (bytes == null ? "null" : bytes.length + " bytes") + ", expected " + BYTES);
    }
    ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    int magic = b.getInt();
    if (magic != MAGIC) {
      throw new TransportException(TransportError.MALFORMED, "queue-pair record: magic 0x" + Integer.toHexString(magic)
          + ", expected 0x" + Integer.toHexString(MAGIC));
    }
    short version = b.getShort();
    if (version != VERSION) {
      throw new TransportException(TransportError.BAD_VERSION, "queue-pair record: version " + version
          + ", expected " + VERSION);
    }
    int type = Short.toUnsignedInt(b.getShort());
    if (type >= AddressType.values().length) {
      throw new TransportException(TransportError.MALFORMED, "queue-pair record: address type " + type
          + ", expected 0 (IB) or 1 (RoCE)");
    }
    int qpn = b.getInt();
    int lid = b.getInt();
    byte[] gid = new byte[16];
    b.get(gid);
    int mtu = b.getInt();
    int psn = b.getInt();
    for (int i = RESERVED_AT; i < BYTES; i++) {
      if (bytes[i] != 0) {
        throw new TransportException(TransportError.MALFORMED, "queue-pair record: reserved byte " + (i - RESERVED_AT)
            + " is 0x" + Integer.toHexString(bytes[i] & 0xff) + ", expected 0");
      }
    }
    try {
      return new NicQpRecord(AddressType.values()[type], qpn, lid, gid, mtu, psn);
    } catch (IllegalArgumentException e) {
      throw new TransportException(TransportError.MALFORMED, e.getMessage());
    }
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof NicQpRecord r && r.addressType == addressType && r.qpn == qpn && r.lid == lid
        && Arrays.equals(r.gid, gid) && r.mtu == mtu && r.psn == psn;
  }

  @Override
  public int hashCode() {
    return ((addressType.hashCode() * 31 + qpn) * 31 + lid) * 31 + Arrays.hashCode(gid) + mtu * 7 + psn;
  }

  @Override
  public String toString() {
    return "NicQpRecord[" + addressType + " qpn=0x" + Integer.toHexString(qpn) + " lid=" + lid + " mtu=" + mtu
        + " psn=0x" + Integer.toHexString(psn) + "]";
  }
}
