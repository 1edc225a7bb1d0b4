package dev.slipstream.spark.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.shuffle.GpuEndpoint;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The registration codec with GPU endpoints, and the device write messages, against truncated and forged bytes. */
class GpuRpcMessagesTest {
  private static PeerInfo hostPeer(String id) {
    return new PeerInfo(id, "host-a", new EndpointDescriptor("tcp", "host-a:7077", new byte[0]));
  }

  private static GpuEndpoint gpu(int device) {
    byte[] ipc = new byte[dev.slipstream.gpu.RegionExport.IPC_HANDLE_BYTES];
    Arrays.fill(ipc, (byte) 3);
    var landing = dev.slipstream.gpu.RegionExport.decode(new dev.slipstream.gpu.RegionExport(
        MemoryKind.DEVICE, 1, device, 77, 256L << 20, 1234, ipc, null).encode());
    return new GpuEndpoint("host-a/boot", device, "0000:1b:00.0", "GPU-00112233-4455-6677-8899-aabbccddeeff",
        landing);
  }

  @Test
  void peersWithAndWithoutGpuRoundTrip() throws TransportException {
    PeerInfo a = hostPeer("1").withGpu(gpu(0));
    PeerInfo b = hostPeer("2");
    var decoded = (RpcMessages.Peers) RpcMessages.decode(RpcMessages.encode(new RpcMessages.Peers(List.of(a, b))));
    assertEquals(List.of(a, b), decoded.peers());
    assertEquals(gpu(0), decoded.peers().get(0).gpu().orElseThrow());
    assertTrue(decoded.peers().get(1).gpu().isEmpty());
    var reg = (RpcMessages.Register) RpcMessages.decode(RpcMessages.encode(new RpcMessages.Register(a)));
    assertEquals(a, reg.peer());
  }

  @Test
  void forgedOrTruncatedGpuFieldsFailNamingWhatWasExpected() {
    byte[] plain = RpcMessages.encode(new RpcMessages.Register(hostPeer("1")));
    byte[] forged = plain.clone();
    forged[forged.length - 1] = 7; // the presence byte is last when there is no GPU endpoint
    var e = assertThrows(TransportException.class, () -> RpcMessages.decode(forged));
    assertEquals("MALFORMED: peer 1: GPU endpoint presence byte 7, expected 0 (no GPU) or 1 (a GPU endpoint follows)",
        e.getMessage());
    byte[] withGpu = RpcMessages.encode(new RpcMessages.Register(hostPeer("1").withGpu(gpu(1))));
    assertThrows(TransportException.class, () -> RpcMessages.decode(Arrays.copyOf(withGpu, withGpu.length - 1)));
    byte[] noPresence = Arrays.copyOf(plain, plain.length - 1);
    assertThrows(TransportException.class, () -> RpcMessages.decode(noPresence));
    // a forged descriptor inside the GPU endpoint: the magic of the 192-byte descriptor, which the
    // (empty) request ring path follows as a 4-byte length
    byte[] badDesc = withGpu.clone();
    badDesc[badDesc.length - 4 - 192] ^= 0x55;
    var d = assertThrows(TransportException.class, () -> RpcMessages.decode(badDesc));
    assertTrue(d.getMessage().contains("region descriptor magic"), d.getMessage());
  }

  @Test
  void nicOffersRoundTripAndForgedRecordsAreRefused() throws TransportException {
    var rec = new dev.slipstream.gpu.nic.NicQpRecord(dev.slipstream.gpu.nic.NicQpRecord.AddressType.ROCE, 0x42, 0,
        new byte[16], 5, 7);
    var offer = new dev.slipstream.gpu.nic.NicOffer("1", "2", 99, 0, List.of(rec));
    byte[] wire = RpcMessages.encode(new RpcMessages.NicOfferMessage(offer));
    assertEquals(offer, ((RpcMessages.NicOfferMessage) RpcMessages.decode(wire)).offer());
    byte[] forged = wire.clone();
    forged[forged.length - 1] = 1;  // the last reserved byte of the record
    var e = assertThrows(TransportException.class, () -> RpcMessages.decode(forged));
    assertTrue(e.getMessage().contains("queue-pair record: reserved byte 23 is 0x1, expected 0"), e.getMessage());
  }

  @Test
  void retiredDeviceWriteTypesAreUnknown() {
    // 39..41 carried device write requests through the driver; requests now go executor to executor.
    for (byte type = 39; type <= 41; type++) {
      byte[] m = RpcMessages.encode(new RpcMessages.MetricsRequest());
      m[3] = type;
      assertTrue(assertThrows(TransportException.class, () -> RpcMessages.decode(m)).getMessage()
          .endsWith("got type id " + type + ", expected 32..38, 42 or 43"));
    }
  }
}
