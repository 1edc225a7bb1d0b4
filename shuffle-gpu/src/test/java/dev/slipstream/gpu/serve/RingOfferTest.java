package dev.slipstream.gpu.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import org.junit.jupiter.api.Test;

/** The remote ring's set-up messages: round trips, and forged fields refused with what was expected. */
class RingOfferTest {
  private static RingOffer back(RingOffer o) throws TransportException {
    WireWriter w = new WireWriter(64);
    o.encode(w);
    WireReader r = new WireReader(w.toByteArray());
    RingOffer d = RingOffer.decode(r);
    r.expectEnd("ring offer");
    return d;
  }

  @Test
  void eachKindComesBackAsSent() throws Exception {
    RingOffer o = RingOffer.offer("7", "3", 4242, 0x8badf00d, 64, 123456789L);
    assertEquals(o, back(o));
    RingOffer a = RingOffer.accept("3", "7", 40, 0x1234, -5L);
    assertEquals(a, back(a));
    RingOffer n = RingOffer.refuse("3", "7", "no gpunetio link to 7");
    assertEquals(n, back(n));
  }

  @Test
  void forgedFieldsAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> RingOffer.offer("7", "7", 1, 1, 64, 0), "to itself");
    IllegalArgumentException slots = assertThrows(IllegalArgumentException.class,
        () -> RingOffer.offer("7", "3", 1, 1, 48, 0));
    assertTrue(slots.getMessage().contains("48 slots, expected a power of two"), slots.getMessage());
    assertThrows(IllegalArgumentException.class, () -> RingOffer.accept("3", "7", 1 << 24, 1, 0), "region id");
    WireWriter w = new WireWriter(64);
    w.putByte(RingOffer.VERSION).putByte(9);
    TransportException kind = assertThrows(TransportException.class,
        () -> RingOffer.decode(new WireReader(w.toByteArray())));
    assertEquals(TransportError.MALFORMED, kind.error());
    assertTrue(kind.getMessage().contains("kind 9, expected 0 (offer), 1 (accept) or 2 (refuse)"), kind.getMessage());
    WireWriter v = new WireWriter(64);
    v.putByte(2);
    TransportException version = assertThrows(TransportException.class,
        () -> RingOffer.decode(new WireReader(v.toByteArray())));
    assertEquals(TransportError.BAD_VERSION, version.error());
    WireWriter bad = new WireWriter(64);
    new RingOffer(RingOffer.Kind.OFFER, "7", "3", 1, 1, 64, 0, "").encode(bad);
    byte[] b = bad.toByteArray();
    int slotsAt = b.length - 4 - 8 - 4; // slots, then the clock and the (empty) reason's length
    b[slotsAt] = 0;
    b[slotsAt + 1] = 0;
    b[slotsAt + 2] = 0;
    b[slotsAt + 3] = 67; // 67 slots in either byte order is not a power of two
    assertThrows(TransportException.class, () -> RingOffer.decode(new WireReader(b)));
  }
}
