package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.shuffle.BlockTable;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.RegionExport;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The holder pushes only into the landing region its reader registered in the driver's peer table:
 * a request that names another descriptor (a forged key or CUDA IPC handle, another executor's
 * region), an unknown reader, a reader of another machine, or a connection that speaks for another
 * reader is refused naming what was got and what was expected.
 */
class PeerLandingsTest {
  private static final EndpointDescriptor READER_AT = new EndpointDescriptor("tcp", "10.0.0.1:7337", null);

  private static RegionExport landing(int device, long key, long pid, byte handle) {
    byte[] ipc = new byte[RegionExport.IPC_HANDLE_BYTES];
    Arrays.fill(ipc, handle);
    return new RegionExport(MemoryKind.DEVICE, 1, device, key, 1 << 20, pid, ipc, null);
  }

  private final GpuEndpoint self = new GpuEndpoint("host-a/boot", 0, "p0", "u0", landing(0, 11, 100, (byte) 1));
  private final GpuEndpoint reader = new GpuEndpoint("host-a/boot", 1, "p1", "u1", landing(1, 22, 200, (byte) 2));
  private final Map<String, PeerLandings.Peer> table = new HashMap<>();
  private final PeerLandings landings = new PeerLandings("1", self, id -> Optional.ofNullable(table.get(id)));

  PeerLandingsTest() {
    table.put("2", new PeerLandings.Peer(READER_AT, Optional.of(reader)));
  }

  private static WriteRequest request(String readerId, RegionExport landing) throws TransportException {
    return DeviceRequests.from(DeviceRequests.request(5, 3, landing, 4096, 4096 + BlockTable.bytes(1), new int[] {8},
        List.of(DeviceRequests.entry(1, 0, 0, 4096))), readerId, 1000).check();
  }

  private TransportException refused(WriteRequest req, EndpointDescriptor from) {
    return assertThrows(TransportException.class, () -> landings.check(req, from));
  }

  @Test
  void theReadersRegisteredLandingIsAccepted() throws TransportException {
    assertEquals(reader.landing().get(), landings.check(request("2", reader.landing().get()), READER_AT));
    assertEquals(reader.landing().get(), landings.check(request("2", reader.landing().get()), null), "no connection to check");
    assertEquals(self.landing().get(), landings.check(request("1", self.landing().get())), "this executor's own");
  }

  @Test
  void aForgedLandingDescriptorIsRefusedWithoutShowingItsKey() throws TransportException {
    RegionExport forgedKey = landing(1, 23, 200, (byte) 2);
    TransportException e = refused(request("2", forgedKey), READER_AT);
    assertEquals(TransportError.BAD_KEY, e.error());
    assertEquals("BAD_KEY: device write request 5 (shuffle 3): landing region id 1, 1048576 bytes on device 1 is not"
        + " the one reader executor 2 registered (id 1, 1048576 bytes on device 1; their keys differ)",
        e.getMessage());
    assertFalse(e.getMessage().contains("22") || e.getMessage().contains("23"), e.getMessage());
    assertEquals(reader.landing().get(), landings.check(request("2", landing(1, 22, 200, (byte) 3)), READER_AT),
        "a request carries no CUDA IPC handle: the one mapped is always the registered one");
    assertTrue(refused(request("2", self.landing().get()), READER_AT).getMessage().contains("is not the one reader"
        + " executor 2 registered"), "another executor's landing, named by a reader");
  }

  @Test
  void unknownUnnamedAndFarReadersAreRefused() throws TransportException {
    assertEquals("UNKNOWN_REGION: device write request 5 (shuffle 3): reader executor 9 is not in this executor's"
        + " peer table (lost, or not registered yet)", refused(request("9", reader.landing().get()), null).getMessage());
    assertEquals("UNKNOWN_REGION: device write request 5 (shuffle 3): names no reader executor, expected the executor"
        + " whose registered landing region it writes to", refused(request("", reader.landing().get()), null)
        .getMessage());
    table.put("3", new PeerLandings.Peer(READER_AT, Optional.of(new GpuEndpoint("host-b/boot", 1, "p", "u",
        reader.landing().get()))));
    assertEquals("UNKNOWN_REGION: device write request 5 (shuffle 3): reader executor 3 runs on host-b/boot, expected"
        + " this machine (host-a/boot): CUDA IPC needs one machine",
        refused(request("3", reader.landing().get()), null).getMessage());
    table.put("4", new PeerLandings.Peer(READER_AT, Optional.of(reader.sharedWith(null))));
    assertEquals("UNKNOWN_REGION: device write request 5 (shuffle 3): reader executor 4 has no device landing region"
        + " in this executor's peer table", refused(request("4", reader.landing().get()), null).getMessage());
    table.put("5", new PeerLandings.Peer(READER_AT, Optional.empty()));
    assertEquals("UNKNOWN_REGION: device write request 5 (shuffle 3): reader executor 5 registered no GPU endpoint",
        refused(request("5", reader.landing().get()), null).getMessage());
  }

  @Test
  void aConnectionCannotSpeakForAnotherReader() throws TransportException {
    EndpointDescriptor stranger = new EndpointDescriptor("tcp", "10.0.0.9:7337", null);
    assertEquals("UNKNOWN_REGION: device write request 5 (shuffle 3): came from " + stranger + ", but reader executor"
        + " 2 registered " + READER_AT, refused(request("2", reader.landing().get()), stranger).getMessage());
  }

  @Test
  void aReadersNicLandingIsAcceptedFromAnyMachineAndAForgedKeyIsNot() throws TransportException {
    dev.slipstream.gpu.nic.NicLanding nic = new dev.slipstream.gpu.nic.NicLanding(1, 0x1234abcd, 1 << 20);
    GpuEndpoint far = new GpuEndpoint("host-b/boot", 1, "p", "u", reader.landing().get()).sharedWith(null).withNic(nic);
    table.put("6", new PeerLandings.Peer(READER_AT, Optional.of(far)));
    WriteRequest viaNic = request("6", reader.landing().get()).onLanding(nic.descriptor(1));
    assertEquals(new PeerLandings.OverNic("6", nic), landings.resolve(viaNic, READER_AT));
    TransportException asImport = assertThrows(TransportException.class, () -> landings.check(viaNic, READER_AT));
    assertTrue(asImport.getMessage().contains("names reader executor 6's NIC landing region, expected its CUDA IPC"
        + " export"), asImport.getMessage());
    WriteRequest forged = viaNic.onLanding(new dev.slipstream.gpu.nic.NicLanding(1, 0x1234abce, 1 << 20).descriptor(1));
    TransportException e = assertThrows(TransportException.class, () -> landings.resolve(forged, READER_AT));
    assertEquals(TransportError.UNKNOWN_REGION, e.error(), e.getMessage());
    WriteRequest longer = viaNic.onLanding(new dev.slipstream.gpu.nic.NicLanding(1, 0x1234abcd, 2 << 20).descriptor(1));
    assertThrows(TransportException.class, () -> landings.resolve(longer, READER_AT), "a longer region than registered");
    EndpointDescriptor stranger = new EndpointDescriptor("tcp", "10.0.0.9:7337", null);
    assertThrows(TransportException.class, () -> landings.resolve(viaNic, stranger), "another connection");
  }
}
