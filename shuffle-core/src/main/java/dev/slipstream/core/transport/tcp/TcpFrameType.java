package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.TransportException;
import java.util.StringJoiner;

/**
 * Type ids of tcp frames. Ids are stable wire values; they start at 0x10 so that a standalone
 * descriptor encoding ({@code WireWriter.TYPE_ENDPOINT}, {@code TYPE_REGION}) sent as a frame by
 * mistake fails as an unknown type.
 */
enum TcpFrameType {
  HELLO(0x10),
  WRITE(0x11),
  WRITE_SIGNAL(0x12),
  SIGNAL(0x13),
  FETCH_ADD(0x14),
  SEND(0x15),
  ACK(0x16),
  ERROR(0x17),
  AUTH_HELLO(0x18),
  AUTH_CHALLENGE(0x19),
  AUTH_PROOF(0x1a);

  private static final TcpFrameType[] BY_ID = new TcpFrameType[256];
  private static final String KNOWN;

  static {
    StringJoiner known = new StringJoiner(", ");
    for (TcpFrameType t : values()) {
      BY_ID[t.id & 0xff] = t;
      known.add(t.id + " (" + t + ")");
    }
    KNOWN = known.toString();
  }

  private final byte id;

  TcpFrameType(int id) {
    this.id = (byte) id;
  }

  byte id() {
    return id;
  }

  /** The type with this id, or null. */
  static TcpFrameType fromId(byte id) {
    return BY_ID[id & 0xff];
  }

  /** The known ids with names, for error messages. */
  static String known() {
    return KNOWN;
  }

  TcpFrame decode(FrameReader in) throws TransportException {
    return switch (this) {
      case HELLO -> TcpHandshake.Hello.decode(in);
      case WRITE -> TcpFrame.Write.decode(in);
      case WRITE_SIGNAL -> TcpFrame.WriteSignal.decode(in);
      case SIGNAL -> TcpFrame.Signal.decode(in);
      case FETCH_ADD -> TcpFrame.FetchAdd.decode(in);
      case SEND -> TcpFrame.Send.decode(in);
      case ACK -> TcpFrame.Ack.decode(in);
      case ERROR -> TcpFrame.ErrorReply.decode(in);
      case AUTH_HELLO -> TcpHandshake.AuthHello.decode(in);
      case AUTH_CHALLENGE -> TcpHandshake.AuthChallenge.decode(in);
      case AUTH_PROOF -> TcpHandshake.AuthProof.decode(in);
    };
  }
}
