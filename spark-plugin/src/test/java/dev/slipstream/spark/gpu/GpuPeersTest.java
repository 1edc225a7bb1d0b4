package dev.slipstream.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.shuffle.GpuEndpoint;
import dev.slipstream.spark.rpc.PeerInfo;
import dev.slipstream.spark.rpc.RpcMessages;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What the driver's peer table hands one executor about another's GPU: the landing descriptor (CUDA
 * IPC handle, key) and the request ring only to executors of the same machine; others, and executors
 * whose GPU is not known yet, get the GPU's identity without them, also through the wire.
 */
class GpuPeersTest {
  private static PeerInfo peer(String id, String hostId) {
    byte[] ipc = new byte[dev.slipstream.gpu.RegionExport.IPC_HANDLE_BYTES];
    Arrays.fill(ipc, (byte) 5);
    var landing = new dev.slipstream.gpu.RegionExport(MemoryKind.DEVICE, 1, 0, 0xfeedL, 1 << 20, 4000 + id.length(),
        ipc, null);
    PeerInfo p = new PeerInfo(id, hostId, new EndpointDescriptor("tcp", hostId + ":7077", new byte[0]));
    return hostId == null ? p : p.withGpu(new GpuEndpoint(hostId, 0, "p", "u-" + id, landing,
        "/dev/shm/slipstream-ring-" + "0123456789abcdef".repeat(2)));
  }

  @Test
  void landingAndRingReachExecutorsOfTheSameMachineOnly() throws TransportException {
    PeerInfo holder = peer("1", "host-a/boot");
    assertSame(holder, GpuPeers.visibleTo(holder, peer("2", "host-a/boot")));
    assertSame(holder, GpuPeers.visibleTo(holder, holder), "its own entry");
    PeerInfo noGpuYet = new PeerInfo("5", "host-a", holder.endpoint());
    for (PeerInfo recipient : new PeerInfo[] {peer("3", "host-b/boot"), noGpuYet, null}) {
      PeerInfo seen = GpuPeers.visibleTo(holder, recipient);
      GpuEndpoint g = seen.gpu().orElseThrow();
      assertTrue(g.landing().isEmpty(), "no landing descriptor for " + recipient);
      assertEquals("", g.requestRing());
      assertEquals(holder.gpu().get().uuid(), g.uuid());
      assertEquals(holder.endpoint(), seen.endpoint());
      var wire = (RpcMessages.PeerJoined) RpcMessages.decode(RpcMessages.encode(new RpcMessages.PeerJoined(seen)));
      assertEquals(seen, wire.peer());
    }
    PeerInfo hostOnly = new PeerInfo("6", "host-a", holder.endpoint());
    assertSame(hostOnly, GpuPeers.visibleTo(hostOnly, null), "nothing to hide without a GPU");
  }

  @Test
  void aLookupNamesWhoAsks() throws TransportException {
    var l = (RpcMessages.Lookup) RpcMessages.decode(RpcMessages.encode(new RpcMessages.Lookup("4", "2")));
    assertEquals(new RpcMessages.Lookup("4", "2"), l);
    assertEquals(List.of("4", ""), List.of(new RpcMessages.Lookup("4").executorId(), new RpcMessages.Lookup("4").from()));
  }
}
