package dev.slipstream.gpu.nic;

import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An executor's gpunetio links, one per peer with a NIC: created when the driver's peer table
 * announces the peer (or when the peer's offer comes first), connected when the peer's records
 * arrive, closed when the peer is lost or comes back with a new link. Offers travel through
 * {@code send} (the driver relays them); see {@link NicOffer} for the nonces.
 *
 * <p>Rules, for this side's link L (nonce n) to peer P and an offer O from P:
 * <ul>
 *   <li>O names a link of ours other than L ({@code O.peerNonce} neither 0 nor n): P is connected to
 *       a link we closed; O's records are not used and our current offer goes back (P then makes a
 *       new link, or drops it as a duplicate);</li>
 *   <li>L not connected: L's queue pairs connect to O's records; if P has not seen L yet
 *       ({@code O.peerNonce != n}), our offer goes to P;</li>
 *   <li>L connected to O's link: a duplicate, dropped (if O names L, P is connected too: L is
 *       confirmed);</li>
 *   <li>L connected to another link of P: P came back; L is closed (once unused), a new link is made,
 *       connected to O and offered.</li>
 * </ul>
 * A link is {@linkplain #connected(String) confirmed} once this side knows that both ends are
 * connected: when it connects on P's answer (which names L), or when P confirms. The side that
 * connects on an answer confirms to P (one more offer naming P's link), so a reader writes requests
 * for a link only once the holder can post on it.
 * A bad offer (wrong recipient, record count, a record the NIC refuses) connects nothing and
 * throws with what was got and what was expected; the link it was for is closed, and the next
 * offer starts over.
 *
 * <p>Offers from one peer arrive in the order it sent them (Spark RPC delivers one sender's messages to
 * an endpoint in order, and the driver relays them in the order received).
 *
 * <p>A link's queue pairs are {@code slots} groups of {@code slotQueues}; a push posts on one group,
 * under a {@link Lease} of it, so pushes to one peer run side by side without sharing a queue
 * pair. With resident rings over the NIC a link has two more ({@link #ringLease}): the one this
 * side's resident kernel posts on for the peer as its reader, and the one this side's host posts
 * its requests into the peer's ring on, as the peer's reader. A link leaves the table at once when replaced, lost or {@linkplain Lease#failed failed},
 * and is closed when its last lease ends. Thread-safe.
 */
public final class NicLinks implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(NicLinks.class);

  private final String self;
  private final NicDevice nic;
  private final int queues;
  private final int slotQueues;
  private final int slots;
  private final boolean rings;
  private final int depth;
  private final Consumer<NicOffer> send;
  private final SecureRandom random = new SecureRandom();
  private final Map<String, Entry> links = new HashMap<>();
  private boolean closed;

  /**
   * @param slotQueues queue pairs a push posts on
   * @param slots pushes to one peer at once (a link has {@code slotQueues * slots} queue pairs)
   * @param depth WQEs per queue pair
   */
  public NicLinks(String self, NicDevice nic, int slotQueues, int slots, int depth, Consumer<NicOffer> send) {
    this(self, nic, slotQueues, slots, false, depth, send);
  }

  /** @param rings whether links also have the two queue pairs of resident rings over the NIC ({@link #ringLease}) */
  public NicLinks(String self, NicDevice nic, int slotQueues, int slots, boolean rings, int depth,
      Consumer<NicOffer> send) {
    if (slotQueues < 1 || slots < 1 || (long) slotQueues * slots + (rings ? 2 : 0) > NicOffer.MAX_QUEUES) {
      throw new IllegalArgumentException("NIC links: " + slots + " slots of " + slotQueues + " queue pairs per link"
          + (rings ? " and 2 for resident rings" : "") + ", expected at least 1 of 1 and at most " + NicOffer.MAX_QUEUES
          + " queue pairs in all");
    }
    this.self = self;
    this.nic = nic;
    this.slotQueues = slotQueues;
    this.slots = slots;
    this.rings = rings;
    this.queues = slotQueues * slots + (rings ? 2 : 0);
    this.depth = depth;
    this.send = send;
  }

  /** One link and its state. */
  private static final class Entry {
    final NicDevice.Link link;
    final long nonce;
    long peerNonce;  // the peer link ours is connected to; 0 until connected
    boolean confirmed;  // the peer's link is connected to ours too
    int leases;
    final boolean[] leased;  // push slots, then the two ring queue pairs
    boolean retired;  // out of the table: closed when the last lease ends

    Entry(NicDevice.Link link, long nonce, int slots) {
      this.link = link;
      this.nonce = nonce;
      this.leased = new boolean[slots + 2];
    }
  }

  /**
   * One slot of a connected link, for one push lane: queue pairs {@code [firstQueue, firstQueue +
   * queues)}. The link stays open until {@link #close}.
   */
  public final class Lease implements AutoCloseable {
    private final String peer;
    private final Entry e;
    private final int slot;
    private final int first;
    private final int count;
    private boolean done;

    private Lease(String peer, Entry e, int slot, int first, int count) {
      this.peer = peer;
      this.e = e;
      this.slot = slot;
      this.first = first;
      this.count = count;
    }

    public NicDevice.Link link() {
      return e.link;
    }

    public int firstQueue() {
      return first;
    }

    public int queues() {
      return count;
    }

    /** False once the link was replaced, failed or lost: pushes take a lease of the current one. */
    public boolean current() {
      synchronized (NicLinks.this) {
        return !e.retired;
      }
    }

    /**
     * A push on this slot ended with an error completion (its queue pairs are in the error state):
     * the link leaves the table, a new one is offered to the peer (which replaces its own on that
     * offer), and later pushes use the new one once connected.
     */
    public void failed() {
      synchronized (NicLinks.this) {
        if (closed || links.get(peer) != e) {
          return;  // replaced already
        }
        LOG.info("gpunetio link to {}: an error completion; offering a new link", peer);
        links.remove(peer);
        retire(e);
        Entry next = null;
        try {
          next = fresh(peer);
          offer(peer, next, 0);
        } catch (RuntimeException ex) {
          // No link to the peer then: its readers read over another path until it offers one.
          if (next != null) {
            links.remove(peer);
            retire(next);
          }
          LOG.warn("gpunetio link to {}: a new link could not be made or offered", peer, ex);
        }
      }
    }

    @Override
    public void close() {
      synchronized (NicLinks.this) {
        if (done) {
          return;
        }
        done = true;
        e.leased[slot] = false;
        if (--e.leases == 0 && e.retired) {
          e.link.close();
        }
      }
    }
  }

  /** The driver announced {@code peer} (which has a NIC): make a link and offer it. */
  public synchronized void peerJoined(String peer) {
    if (closed || peer.equals(self) || links.containsKey(peer)) {
      return;
    }
    offer(peer, fresh(peer), 0);
  }

  /** {@code peer} is gone: its link leaves the table (closed once unused). */
  public synchronized void peerLost(String peer) {
    Entry e = links.remove(peer);
    if (e != null) {
      retire(e);
    }
  }

  /** An offer from a peer, relayed by the driver. */
  public synchronized void offered(NicOffer o) {
    if (closed) {
      return;
    }
    if (!o.to().equals(self)) {
      throw new IllegalArgumentException("NIC offer from " + o.from() + " is addressed to executor " + o.to()
          + ", expected " + self);
    }
    if (o.records().size() != queues) {
      throw new IllegalArgumentException("NIC offer from " + o.from() + ": " + o.records().size()
          + " queue-pair records, expected " + queues + " (one per queue pair of a link)");
    }
    Entry e = links.get(o.from());
    if (e != null && o.peerNonce() != 0 && o.peerNonce() != e.nonce) {
      offer(o.from(), e, e.peerNonce);  // the peer names a link of ours that is gone: ours is current
      return;
    }
    if (e != null && e.peerNonce != 0) {
      if (e.peerNonce == o.nonce()) {
        if (o.peerNonce() == e.nonce) {
          e.confirmed = true;  // the peer is connected to this link: its confirmation, or a crossed answer
        }
        return;  // a duplicate
      }
      LOG.info("gpunetio link to {}: the peer made a new link; reconnecting", o.from());
      links.remove(o.from());
      retire(e);
      e = null;
    }
    if (e == null) {
      e = fresh(o.from());
    }
    if (o.peerNonce() != 0 && o.peerNonce() != e.nonce) {
      offer(o.from(), e, 0);  // a new link of ours: the peer's link must be made again
      return;
    }
    try {
      for (int q = 0; q < queues; q++) {
        e.link.connect(q, o.records().get(q));
      }
    } catch (RuntimeException ex) {
      links.remove(o.from());
      retire(e);
      throw new IllegalArgumentException("NIC offer from " + o.from() + " refused: " + ex.getMessage(), ex);
    }
    e.peerNonce = o.nonce();
    LOG.info("gpunetio link to {} connected: {} queue pairs, doorbell rung by the {}", o.from(), queues,
        e.link.gpuDoorbell() ? "GPU" : "host");
    // The peer's answer (naming this link) means it is connected already: confirmed, and it hears so.
    // Otherwise the answer goes to the peer.
    e.confirmed = o.peerNonce() == e.nonce;
    offer(o.from(), e, o.nonce());
  }

  /**
   * A lease of a free slot of the connected link to {@code peer}; empty when there is no connected
   * link (yet). Throws when every slot is leased.
   */
  public synchronized Optional<Lease> lease(String peer) {
    Entry e = links.get(peer);
    if (e == null || e.peerNonce == 0) {
      return Optional.empty();
    }
    for (int s = 0; s < slots; s++) {
      if (!e.leased[s]) {
        e.leased[s] = true;
        e.leases++;
        return Optional.of(new Lease(peer, e, s, s * slotQueues, slotQueues));
      }
    }
    throw new IllegalStateException("gpunetio link to " + peer + ": all " + slots + " slots of " + slotQueues
        + " queue pairs are in use");
  }

  /** The two ring queue pairs of a link: the resident kernel's (this side holds, the peer reads) and the host's. */
  public enum RingRole {
    KERNEL,
    HOST
  }

  /**
   * A lease of ring queue pair {@code role} of the connected link to {@code peer} (one queue pair,
   * for as long as the ring lives); empty when there is no connected link (yet). Throws when these
   * links have no ring queue pairs, or that one is leased already.
   */
  public synchronized Optional<Lease> ringLease(String peer, RingRole role) {
    if (!rings) {
      throw new IllegalStateException("gpunetio links of executor " + self + " have no resident ring queue pairs");
    }
    Entry e = links.get(peer);
    if (e == null || e.peerNonce == 0) {
      return Optional.empty();
    }
    int s = slots + role.ordinal();
    if (e.leased[s]) {
      throw new IllegalStateException("gpunetio link to " + peer + ": its " + role + " ring queue pair is leased");
    }
    e.leased[s] = true;
    e.leases++;
    return Optional.of(new Lease(peer, e, s, slots * slotQueues + role.ordinal(), 1));
  }

  /**
   * Whether the link to {@code peer} is connected at both ends as far as this side knows (a reader
   * sends requests over it only then; a holder can {@link #lease} it once its own end is connected).
   */
  public synchronized boolean connected(String peer) {
    Entry e = links.get(peer);
    return e != null && e.peerNonce != 0 && e.confirmed;
  }

  /** Peers with a link connected at both ends ({@link #connected(String)}). */
  public synchronized List<String> connected() {
    List<String> out = new ArrayList<>();
    links.forEach((p, e) -> {
      if (e.peerNonce != 0 && e.confirmed) {
        out.add(p);
      }
    });
    return out;
  }

  @Override
  public synchronized void close() {
    closed = true;
    links.values().forEach(this::retire);
    links.clear();
  }

  private Entry fresh(String peer) {
    long nonce;
    do {
      nonce = random.nextLong();
    } while (nonce == 0);
    Entry e = new Entry(nic.createLink(queues, depth), nonce, slots);
    links.put(peer, e);
    return e;
  }

  private void offer(String peer, Entry e, long peerNonce) {
    send.accept(new NicOffer(self, peer, e.nonce, peerNonce, e.link.records()));
  }

  private void retire(Entry e) {
    e.retired = true;
    if (e.leases == 0) {
      e.link.close();
    }
  }
}
