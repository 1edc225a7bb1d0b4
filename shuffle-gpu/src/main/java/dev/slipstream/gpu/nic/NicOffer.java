package dev.slipstream.gpu.nic;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.util.ArrayList;
import java.util.List;

/**
 * What one executor sends another (through the driver's RPC endpoint) to connect a gpunetio link:
 * its link's records, the link's nonce (a new one for every link it creates), and the nonce of the
 * peer's link it connected to ({@code 0}: none yet). The nonces let each side tell a duplicate from
 * a peer that made a new link, and a record meant for a link it no longer has.
 *
 * <p>Wire form: version byte ({@link #VERSION}), from, to, nonce, peer nonce, record count, records
 * ({@link NicQpRecord#BYTES} each). {@link #decode} names what was got and what was expected.
 */
public record NicOffer(String from, String to, long nonce, long peerNonce, List<NicQpRecord> records) {
  public static final byte VERSION = 1;
  public static final int MAX_QUEUES = 256;
  static final int MAX_ID = 256;

  public NicOffer {
    if (from == null || from.isEmpty() || to == null || to.isEmpty() || from.equals(to)) {
      throw new IllegalArgumentException("NIC offer from '" + from + "' to '" + to
          + "', expected two different executor ids");
    }
    if (nonce == 0) {
      throw new IllegalArgumentException("NIC offer from " + from + ": nonce 0, expected a link's nonzero nonce");
    }
    if (records == null || records.isEmpty() || records.size() > MAX_QUEUES) {
      throw new IllegalArgumentException("NIC offer from " + from + ": " + (records == null ? "null" : records.size())
          + " queue-pair records, expected 1.." + MAX_QUEUES);
    }
    records = List.copyOf(records);
  }

  public void encode(WireWriter w) {
    w.putByte(VERSION).putString(from).putString(to).putLong(nonce).putLong(peerNonce).putInt(records.size());
    records.forEach(r -> w.putBytes(r.encode()));
  }

  public static NicOffer decode(WireReader r) throws TransportException {
    byte v = r.getByte("NIC offer version");
    if (v != VERSION) {
      throw new TransportException(TransportError.BAD_VERSION, "NIC offer: version " + v + ", expected " + VERSION);
    }
    String from = r.getString("NIC offer sender", MAX_ID);
    String to = r.getString("NIC offer recipient", MAX_ID);
    long nonce = r.getLong("NIC offer nonce");
    long peerNonce = r.getLong("NIC offer peer nonce");
    int n = r.getInt("NIC offer record count", 1, MAX_QUEUES);
    List<NicQpRecord> records = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      records.add(NicQpRecord.decode(r.getBytes("NIC offer record " + i, NicQpRecord.BYTES)));
    }
    try {
      return new NicOffer(from, to, nonce, peerNonce, records);
    } catch (IllegalArgumentException e) {
      throw new TransportException(TransportError.MALFORMED, e.getMessage());
    }
  }
}
