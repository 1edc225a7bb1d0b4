package dev.slipstream.gpu.serve;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;

/**
 * What a reader and a holder on different machines say to each other (through the driver's RPC
 * endpoint) to set up a resident ring over their gpunetio link ({@code native/include/slipstream/serve.h},
 * rings in two copies):
 * <ul>
 *   <li>{@link Kind#OFFER}, reader to holder: the reader's copy of the ring, as its NIC registered
 *       it ({@code regionId}, {@code key}), of {@code slots} slots; {@code nanos} is the reader's
 *       {@link System#nanoTime()} when it sent the offer;</li>
 *   <li>{@link Kind#ACCEPT}, holder to reader: the holder's copy ({@code regionId}, {@code key}),
 *       with the reader entry set; {@code nanos} is the holder's {@link System#nanoTime()} when it
 *       answered, from which the reader estimates the holder's clock (deadlines are in it);</li>
 *   <li>{@link Kind#REFUSE}, holder to reader: no ring, {@code reason} says why (the reader's
 *       requests to that holder go the host-driven way).</li>
 * </ul>
 * Wire form: version byte ({@link #VERSION}), kind, from, to, region id, key, slots, nanos, reason.
 * {@link #decode} names what was got and what was expected. Immutable.
 */
public record RingOffer(Kind kind, String from, String to, int regionId, int key, int slots, long nanos,
                        String reason) {
  public static final byte VERSION = 1;
  static final int MAX_ID = 256;
  static final int MAX_REASON = 1024;

  /** What the message is. */
  public enum Kind {
    OFFER,
    ACCEPT,
    REFUSE
  }

  public RingOffer {
    if (kind == null || from == null || from.isEmpty() || to == null || to.isEmpty() || from.equals(to)) {
      throw new IllegalArgumentException("ring offer " + kind + " from '" + from + "' to '" + to
          + "', expected a kind and two different executor ids");
    }
    if (kind != Kind.REFUSE && (regionId < 0 || regionId > (1 << 24) - 2)) {
      throw new IllegalArgumentException("ring offer " + kind + " from " + from + ": region id "
          + Integer.toUnsignedString(regionId) + ", expected 0.." + ((1 << 24) - 2));
    }
    if (kind == Kind.OFFER && (slots < 1 || slots > ServeRing.MAX_SLOTS || Integer.bitCount(slots) != 1)) {
      throw new IllegalArgumentException("ring offer from " + from + ": " + slots + " slots, expected a power of two"
          + " up to " + ServeRing.MAX_SLOTS);
    }
    reason = reason == null ? "" : reason;
    if (reason.length() > MAX_REASON) {
      reason = reason.substring(0, MAX_REASON);
    }
  }

  public static RingOffer offer(String reader, String holder, int regionId, int key, int slots, long nanos) {
    return new RingOffer(Kind.OFFER, reader, holder, regionId, key, slots, nanos, "");
  }

  public static RingOffer accept(String holder, String reader, int regionId, int key, long nanos) {
    return new RingOffer(Kind.ACCEPT, holder, reader, regionId, key, 0, nanos, "");
  }

  public static RingOffer refuse(String holder, String reader, String reason) {
    return new RingOffer(Kind.REFUSE, holder, reader, 0, 0, 0, 0, reason);
  }

  public void encode(WireWriter w) {
    w.putByte(VERSION).putByte((byte) kind.ordinal()).putString(from).putString(to).putInt(regionId).putInt(key)
        .putInt(slots).putLong(nanos).putString(reason);
  }

  public static RingOffer decode(WireReader r) throws TransportException {
    byte v = r.getByte("ring offer version");
    if (v != VERSION) {
      throw new TransportException(TransportError.BAD_VERSION, "ring offer: version " + v + ", expected " + VERSION);
    }
    byte k = r.getByte("ring offer kind");
    if (k < 0 || k >= Kind.values().length) {
      throw new TransportException(TransportError.MALFORMED, "ring offer: kind " + k + ", expected 0 (offer), 1"
          + " (accept) or 2 (refuse)");
    }
    String from = r.getString("ring offer sender", MAX_ID);
    String to = r.getString("ring offer recipient", MAX_ID);
    int id = r.getInt("ring offer region id");
    int key = r.getInt("ring offer key");
    int slots = r.getInt("ring offer slots");
    long nanos = r.getLong("ring offer clock");
    String reason = r.getString("ring offer reason", MAX_REASON * 4);
    try {
      return new RingOffer(Kind.values()[k], from, to, id, key, slots, nanos, reason);
    } catch (IllegalArgumentException e) {
      throw new TransportException(TransportError.MALFORMED, e.getMessage());
    }
  }
}
