package dev.slipstream.gpu.nic;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The link table's connection protocol against a model of the verbs state machine: queue pairs
 * start in RESET, connect once to a record, and a pair of queue pairs works only when each is
 * connected to the other. Offers travel through a FIFO bus, as the driver relays them.
 */
class NicLinksTest {
  static final int QUEUES = 2;

  /** A fabric of model queue pairs: qpn to queue pair. */
  static final class Fabric {
    final Map<Integer, ModelQp> qps = new HashMap<>();
    int nextQpn = 0x100;
    int closedLinks;

    /** Both ends of every connected queue pair point at each other and are open. */
    boolean mutual(ModelLink a, ModelLink b) {
      for (int q = 0; q < QUEUES; q++) {
        ModelQp x = a.qps.get(q);
        ModelQp y = b.qps.get(q);
        if (x.closed || y.closed || x.peer != y.qpn || y.peer != x.qpn || x.peerPsn != y.psn || y.peerPsn != x.psn) {
          return false;
        }
      }
      return true;
    }
  }

  static final class ModelQp {
    final int qpn;
    final int psn;
    int peer;  // 0: RESET
    int peerPsn;
    boolean closed;

    ModelQp(int qpn, int psn) {
      this.qpn = qpn;
      this.psn = psn;
    }
  }

  static final class ModelLink implements NicDevice.Link {
    final Fabric fabric;
    final List<ModelQp> qps = new ArrayList<>();
    boolean closed;

    ModelLink(Fabric fabric, int queues) {
      this.fabric = fabric;
      for (int q = 0; q < queues; q++) {
        ModelQp qp = new ModelQp(fabric.nextQpn++, (fabric.nextQpn * 7919) & 0xffffff);
        fabric.qps.put(qp.qpn, qp);
        qps.add(qp);
      }
    }

    @Override
    public List<NicQpRecord> records() {
      List<NicQpRecord> out = new ArrayList<>();
      qps.forEach(q -> out.add(new NicQpRecord(NicQpRecord.AddressType.ROCE, q.qpn, 0, new byte[16], 5, q.psn)));
      return out;
    }

    @Override
    public void connect(int q, NicQpRecord peer) {
      ModelQp qp = qps.get(q);
      if (closed || qp.peer != 0) {
        throw new IllegalStateException("queue pair " + qp.qpn + " is not in RESET");
      }
      if (!fabric.qps.containsKey(peer.qpn())) {
        throw new IllegalArgumentException("no queue pair " + peer.qpn() + " on the fabric");
      }
      qp.peer = peer.qpn();
      qp.peerPsn = peer.psn();
    }

    @Override
    public boolean gpuDoorbell() {
      return false;
    }

    @Override
    public dev.slipstream.gpu.QueueSet queueSet(dev.slipstream.gpu.GpuContext ctx, int first, int count,
        List<dev.slipstream.gpu.GpuRegion> locals, List<NicLanding> peer) {
      throw new UnsupportedOperationException("a model link has no GPU queue pairs");
    }

    @Override
    public void close() {
      if (closed) {
        throw new IllegalStateException("link closed twice");
      }
      closed = true;
      qps.forEach(q -> q.closed = true);
      fabric.closedLinks++;
    }
  }

  /** A NIC of the fabric that remembers its links. */
  static final class ModelNic implements NicDevice {
    final Fabric fabric;
    final List<ModelLink> made = new ArrayList<>();

    ModelNic(Fabric fabric) {
      this.fabric = fabric;
    }

    @Override
    public Link createLink(int queues, int depth) {
      ModelLink l = new ModelLink(fabric, queues);
      made.add(l);
      return l;
    }

    ModelLink current() {
      return made.get(made.size() - 1);
    }
  }

  /** Executors and the driver's relay. */
  static final class Cluster {
    final Fabric fabric = new Fabric();
    final ArrayDeque<NicOffer> bus = new ArrayDeque<>();
    final Map<String, NicLinks> links = new HashMap<>();
    final Map<String, ModelNic> nics = new HashMap<>();
    int delivered;
    int lastRecords;

    NicLinks start(String id) {
      ModelNic nic = new ModelNic(fabric);
      NicLinks l = new NicLinks(id, nic, 1, QUEUES, 64, bus::add);  // QUEUES slots of one queue pair
      links.put(id, l);
      nics.put(id, nic);
      return l;
    }

    void settle() {
      for (int i = 0; !bus.isEmpty(); i++) {
        assertTrue(i < 100, "the offers do not settle");
        NicOffer o = bus.poll();
        NicLinks to = links.get(o.to());
        lastRecords = o.records().size();
        if (to != null) {
          delivered++;
          to.offered(o);
        }
      }
    }

    /** The current links of a and b are connected to each other, and each side leases them. */
    void assertConnected(String a, String b) {
      assertTrue(fabric.mutual(nics.get(a).current(), nics.get(b).current()), a + " and " + b + " not connected");
      NicLinks.Lease x = links.get(a).lease(b).orElseThrow();
      NicLinks.Lease y = links.get(b).lease(a).orElseThrow();
      x.close();
      y.close();
    }
  }

  @Test
  void oneSideJoinsFirst() {
    Cluster c = new Cluster();
    NicLinks a = c.start("1");
    c.start("2");
    a.peerJoined("2");
    c.settle();
    c.links.get("2").peerJoined("1");  // the driver's announcement arrives after the offer: nothing new
    c.settle();
    c.assertConnected("1", "2");
    assertEquals(3, c.delivered, "offer, answer and confirmation");
    assertEquals(1, c.nics.get("1").made.size());
    assertEquals(1, c.nics.get("2").made.size());
  }

  @Test
  void bothSidesJoinAtOnce() {
    Cluster c = new Cluster();
    c.start("1").peerJoined("2");
    c.start("2").peerJoined("1");
    c.settle();
    c.assertConnected("1", "2");
    assertEquals(0, c.fabric.closedLinks);
    assertTrue(c.delivered <= 4, "delivered " + c.delivered);
  }

  @Test
  void peerThatComesBackGetsANewLinkAndTheOldOneClosesAfterItsLastLease() {
    Cluster c = new Cluster();
    NicLinks a = c.start("1");
    c.start("2");
    a.peerJoined("2");
    c.settle();
    ModelLink old = c.nics.get("1").current();
    NicLinks.Lease inFlight = a.lease("2").orElseThrow();
    c.start("2").peerJoined("1");  // executor 2 restarted: a new table, a new NIC
    c.settle();
    c.assertConnected("1", "2");
    assertFalse(old.closed, "a link in use by a push closed under it");
    inFlight.close();
    inFlight.close();  // twice: once counts
    assertTrue(old.closed);
    assertEquals(1, c.fabric.closedLinks);
  }

  @Test
  void lostPeerClosesItsLinkAndLeasesEndEmpty() {
    Cluster c = new Cluster();
    NicLinks a = c.start("1");
    c.start("2").peerJoined("1");
    c.settle();
    c.assertConnected("1", "2");
    a.peerLost("2");
    assertTrue(c.nics.get("1").current().closed);
    assertTrue(a.lease("2").isEmpty());
    assertTrue(a.connected().isEmpty());
  }

  @Test
  void offerForALinkThatIsGoneIsAnsweredWithTheCurrentOne() {
    Cluster c = new Cluster();
    NicLinks a = c.start("1");
    NicLinks b = c.start("2");
    a.peerJoined("2");
    c.settle();
    c.assertConnected("1", "2");
    // Executor 1 loses executor 2 for a while (its link closes), then hears of it again.
    a.peerLost("2");
    a.peerJoined("2");
    c.settle();
    c.assertConnected("1", "2");
    // An offer naming a link of 1 that no longer exists is not connected to.
    long stale = 12345;
    NicOffer o = new NicOffer("2", "1", 777, stale, c.nics.get("2").current().records());
    int made = c.nics.get("1").made.size();
    a.offered(o);
    assertEquals(1, c.bus.size(), "the current offer goes back");
    c.settle();
    c.assertConnected("1", "2");
    assertEquals(made, c.nics.get("1").made.size(), "a connected link torn down by a stale offer");
    assertFalse(b.connected().isEmpty());
  }

  @Test
  void badOffersConnectNothing() {
    Cluster c = new Cluster();
    NicLinks a = c.start("1");
    c.start("2");
    List<NicQpRecord> one = new ModelLink(c.fabric, 1).records();
    IllegalArgumentException count = assertThrows(IllegalArgumentException.class,
        () -> a.offered(new NicOffer("2", "1", 5, 0, one)));
    assertTrue(count.getMessage().contains("1 queue-pair records, expected 2"), count.getMessage());
    IllegalArgumentException to = assertThrows(IllegalArgumentException.class,
        () -> a.offered(new NicOffer("2", "3", 5, 0, new ModelLink(c.fabric, 2).records())));
    assertTrue(to.getMessage().contains("addressed to executor 3, expected 1"), to.getMessage());
    // Records of queue pairs that do not exist: the NIC refuses, the link is closed, nothing leased.
    List<NicQpRecord> forged = List.of(new NicQpRecord(NicQpRecord.AddressType.ROCE, 0xabcdef, 0, new byte[16], 5, 1),
        new NicQpRecord(NicQpRecord.AddressType.ROCE, 0xabcdee, 0, new byte[16], 5, 1));
    IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
        () -> a.offered(new NicOffer("2", "1", 6, 0, forged)));
    assertTrue(refused.getMessage().contains("NIC offer from 2 refused: no queue pair"), refused.getMessage());
    assertTrue(c.nics.get("1").current().closed);
    assertTrue(a.lease("2").isEmpty());
    assertTrue(c.bus.isEmpty(), "nothing offered back after a refusal");
    // The next valid exchange connects.
    c.links.get("2").peerJoined("1");
    c.settle();
    c.assertConnected("1", "2");
  }

  /** Links with ring queue pairs: two past the push slots, one lease each, refused to links without them. */
  @Test
  void ringQueuePairsComeAfterThePushSlotsAndAreLeasedOnce() {
    Cluster c = new Cluster();
    NicLinks a = new NicLinks("1", new ModelNic(c.fabric), 1, QUEUES, true, 64, c.bus::add);
    NicLinks b = new NicLinks("2", new ModelNic(c.fabric), 1, QUEUES, true, 64, c.bus::add);
    c.links.put("1", a);
    c.links.put("2", b);
    assertTrue(a.ringLease("2", NicLinks.RingRole.HOST).isEmpty(), "no link yet");
    b.peerJoined("1");
    c.settle();
    assertEquals(QUEUES + 2, c.delivered > 0 ? c.lastRecords : -1, "records per offer: push slots and two ring queue pairs");
    NicLinks.Lease kernel = a.ringLease("2", NicLinks.RingRole.KERNEL).orElseThrow();
    NicLinks.Lease host = a.ringLease("2", NicLinks.RingRole.HOST).orElseThrow();
    assertEquals(QUEUES, kernel.firstQueue());
    assertEquals(QUEUES + 1, host.firstQueue());
    assertEquals(1, host.queues());
    IllegalStateException twice = assertThrows(IllegalStateException.class,
        () -> a.ringLease("2", NicLinks.RingRole.HOST));
    assertTrue(twice.getMessage().contains("HOST ring queue pair is leased"), twice.getMessage());
    NicLinks.Lease push = a.lease("2").orElseThrow();
    assertTrue(push.firstQueue() < QUEUES, "push slots stay below the ring queue pairs");
    push.close();
    host.close();
    a.ringLease("2", NicLinks.RingRole.HOST).orElseThrow().close();
    kernel.close();
    NicLinks plain = c.start("3");
    IllegalStateException none = assertThrows(IllegalStateException.class,
        () -> plain.ringLease("1", NicLinks.RingRole.KERNEL));
    assertTrue(none.getMessage().contains("have no resident ring queue pairs"), none.getMessage());
  }

  @Test
  void pushesToOnePeerLeaseDistinctSlotsUntilNoneIsLeft() {
    Cluster c = new Cluster();
    NicLinks a = c.start("1");
    c.start("2").peerJoined("1");
    c.settle();
    NicLinks.Lease x = a.lease("2").orElseThrow();
    NicLinks.Lease y = a.lease("2").orElseThrow();
    assertEquals(0, x.firstQueue());
    assertEquals(1, y.firstQueue());
    assertEquals(1, x.queues());
    IllegalStateException full = assertThrows(IllegalStateException.class, () -> a.lease("2"));
    assertTrue(full.getMessage().contains("all 2 slots of 1 queue pairs are in use"), full.getMessage());
    x.close();
    NicLinks.Lease z = a.lease("2").orElseThrow();
    assertEquals(0, z.firstQueue(), "a released slot is leased again");
    assertTrue(a.connected("2"));
    assertFalse(a.connected("3"));
    y.close();
    z.close();
  }

  @Test
  void failedLinkIsReplacedOnBothSidesAndClosesAfterItsLastLease() {
    Cluster c = new Cluster();
    NicLinks a = c.start("1");
    NicLinks b = c.start("2");
    a.peerJoined("2");
    c.settle();
    ModelLink oldA = c.nics.get("1").current();
    ModelLink oldB = c.nics.get("2").current();
    NicLinks.Lease failed = a.lease("2").orElseThrow();
    NicLinks.Lease other = a.lease("2").orElseThrow();
    failed.failed();
    failed.failed();  // a second report of the same link replaces nothing more
    other.failed();
    assertFalse(failed.current());
    assertTrue(a.lease("2").isEmpty(), "a lease of the new link before it is connected");
    assertEquals(1, c.bus.size(), "one new offer");
    c.settle();
    c.assertConnected("1", "2");
    assertEquals(2, c.nics.get("1").made.size());
    assertEquals(2, c.nics.get("2").made.size(), "the peer replaced its link on the new offer");
    assertTrue(oldB.closed, "the peer's old link");
    assertFalse(oldA.closed, "closed under the pushes that lease it");
    failed.close();
    other.close();
    assertTrue(oldA.closed);
    assertTrue(b.lease("1").orElseThrow().current());
  }

  @Test
  void aLinkIsConfirmedOnlyOnceBothEndsAreConnected() {
    Cluster c = new Cluster();
    NicLinks a = c.start("1");
    NicLinks b = c.start("2");
    a.peerJoined("2");
    b.offered(c.bus.poll());  // the offer: 2 connects and answers
    NicLinks.Lease early = b.lease("1").orElseThrow();  // 2's end is connected: it can post
    early.close();
    assertFalse(b.connected("1"), "2 cannot know yet that 1 is connected");
    assertFalse(a.connected("2"));
    a.offered(c.bus.poll());  // the answer: 1 connects, knows 2 is, and confirms
    assertTrue(a.connected("2"));
    assertFalse(b.connected("1"));
    b.offered(c.bus.poll());  // the confirmation
    assertTrue(b.connected("1"));
    assertTrue(c.bus.isEmpty(), "nothing more is sent");
    c.assertConnected("1", "2");
  }
}
