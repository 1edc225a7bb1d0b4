package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import dev.slipstream.core.shuffle.BlockTable;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.gpu.GpuTestSupport;
import dev.slipstream.gpu.NativeNic;
import dev.slipstream.gpu.PushKernel;
import dev.slipstream.gpu.nic.NicLanding;
import dev.slipstream.gpu.nic.NicLinks;
import dev.slipstream.gpu.nic.NicOffer;
import dev.slipstream.testkit.NodeRig;
import dev.slipstream.testkit.ServingConformanceSuite;
import dev.slipstream.testkit.ServingRig;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The serving conformance suite for the block writer over NIC links: the holder's and the reader's
 * executors each open the software NIC ({@code softnic}), register their regions on it once (the
 * holder's map outputs as they are made, the reader's landing region), connect a link by exchanging
 * offers, and the holder's push kernel posts GPUNetIO RDMA writes and the signal's fetch-add on a
 * slot of that link, into the landing region as the reader's NIC registered it; the reader's NIC
 * checks every key and range. One GPU, one process. Skips with the reason without a GPU, or with a
 * native library built without the GPUNetIO device headers.
 */
class NicLinkServingConformanceGpuTest extends ServingConformanceSuite {
  @Override
  protected ServingRig newRig() throws Exception {
    GpuTestSupport.assumeGpunetio();
    return new LinkRig();
  }

  /**
   * The reader's NIC no longer has the landing registration the holder's peer table names (it was
   * removed; the table is stale): the holder's RDMA writes complete with the remote access error,
   * the request fails with that syndrome and writes nothing, and the link is replaced; once the
   * reader registers the region again and the new link connects, the next request lands.
   */
  @Test
  void anErrorCompletionFailsTheRequestWithItsSyndromeAndTheNextOneGoesOverANewLink() throws Exception {
    LinkRig r = (LinkRig) rig;
    ServingRig.Output out = r.commit(9, 1, new int[] {65536, 4096});
    Object before = r.currentLink();
    r.dropLandingRegistration();
    ServingRig.Landing first = r.landing(LinkRig.need(out));
    WriteResult failed = r.send(r.layOut(first, 9, 1, out));
    assertFalse(failed.served(), "served although the reader's NIC has no such registration");
    assertTrue(failed.reason().contains("remote access error"), failed.error() + ": " + failed.reason());
    byte[] b = first.read(first.base(), (int) LinkRig.need(out));
    for (int i = 0; i < b.length; i++) {
      assertEquals(0, b[i], "byte " + i + " of the failed request's range was written");
    }
    r.registerLandingAgain();
    r.awaitLinked();
    assertFalse(before == r.currentLink(), "the link whose queue pairs are in the error state is still in use");
    ServingRig.Landing second = r.landing(LinkRig.need(out));
    WriteRequest req = r.layOut(second, 9, 1, out);
    WriteResult ok = r.send(req);
    assertTrue(ok.served(), ok.error() + ": " + ok.reason());
    assertArrayEquals(out.bytes()[0], second.read(req.entries().get(0).landingOffset(), out.bytes()[0].length));
    assertArrayEquals(out.bytes()[1], second.read(req.entries().get(1).landingOffset(), out.bytes()[1].length));
  }

  static final class LinkRig extends NodeRig {
    private static final int LANDING_ID = 1;
    private final NativeNic holderNic = NativeNic.open(NativeNic.SOFTWARE, 1, 0, 0, NativeNic.Doorbell.AUTO);
    private final NativeNic readerNic = NativeNic.open(NativeNic.SOFTWARE, 1, 0, 0, NativeNic.Doorbell.AUTO);
    private final PushServingConformanceGpuTest.GpuOutputs outputs =
        new PushServingConformanceGpuTest.GpuOutputs(holderNic);
    private final PushKernel kernel = PushKernel.load(outputs.ctx);
    private final DeviceLanding landing = new DeviceLanding(outputs.ctx, 96L << 20, LANDING_ID);
    /** The reader's landing region as its NIC registered it (and as the holder's peer table has it). */
    private volatile NicLanding nicLanding;
    /** The driver's relay: offers delivered in order, on a thread of its own. */
    private final ExecutorService relay = Executors.newSingleThreadExecutor();
    private final NicLinks holderLinks = new NicLinks("holder", holderNic, 4, 4, PushScheduler.GPUNETIO_QUEUE_DEPTH,
        this::deliver);
    private final NicLinks readerLinks = new NicLinks("reader", readerNic, 4, 4, PushScheduler.GPUNETIO_QUEUE_DEPTH,
        this::deliver);
    private final PushScheduler server;
    private long next;

    LinkRig() throws Exception {
      super("loopback");
      nicLanding = new NicLanding(LANDING_ID,
          readerNic.register(landing.region().devicePointer(), landing.region().length(), LANDING_ID),
          landing.region().length());
      holderLinks.peerJoined("reader");
      awaitLinked();
      server = new PushScheduler(outputs.ctx, kernel, outputs.store, 1 << 20, 4, PushScheduler.Lanes.of(
          dev.slipstream.gpu.Backend.NVLINK), req -> LaneTarget.overLink(holderLinks.lease(req.reader().executorId())
              .orElseThrow(() -> new IllegalStateException("no connected link")), nicLanding, holderNic));
      GpuEndpoint holderSide = new GpuEndpoint("host-a/boot", 0, "p", "u", landing.export());
      // The reader is on another machine as far as the holder knows: only its NIC landing is usable.
      PeerLandings landings = new PeerLandings("holder", holderSide, id -> id.equals("reader") && nodes.readerKnown()
          ? Optional.of(new PeerLandings.Peer(nodes.reader().localEndpoint(), Optional.of(
              new GpuEndpoint("host-b/boot", 0, "p", "u", landing.export()).withNic(nicLanding))))
          : Optional.empty());
      nodes.holder().setWriter(MemoryKind.DEVICE, new PushWriter(server, landings, x -> {
        throw new IllegalStateException("a NIC landing region is never imported");
      }, 30_000));
    }

    /** Waits until both sides' links to each other are connected. */
    void awaitLinked() throws InterruptedException {
      for (long t0 = System.nanoTime(); !holderLinks.connected("reader") || !readerLinks.connected("holder"); ) {
        if (System.nanoTime() - t0 > 10_000_000_000L) {
          throw new IllegalStateException("the NIC link did not connect within 10 s");
        }
        Thread.sleep(1);
      }
    }

    /** The holder's connected link to the reader now. */
    Object currentLink() {
      try (NicLinks.Lease l = holderLinks.lease("reader").orElseThrow()) {
        return l.link();
      }
    }

    /** The reader's NIC removes the landing registration; the holder's peer table still names it. */
    void dropLandingRegistration() {
      readerNic.deregister(LANDING_ID, nicLanding.mkey());
    }

    /** The reader registers its landing region again (a new key), and the holder's table learns it. */
    void registerLandingAgain() {
      nicLanding = new NicLanding(LANDING_ID, readerNic.register(landing.region().devicePointer(),
          landing.region().length(), LANDING_ID), landing.region().length());
    }

    /** Landing bytes of a request for partitions 0 and 1 of {@code out}: blocks, table, signal. */
    static long need(Output out) {
      long n = 0;
      for (byte[] b : out.bytes()) {
        n += (Math.max(16, b.length) + 15) & ~15L;
      }
      return n + ((BlockTable.bytes(out.bytes().length) + 15) & ~15L) + 16;
    }

    /** A request for every partition of map {@code mapId}'s output {@code out}, laid out in {@code l}. */
    WriteRequest layOut(Landing l, int shuffleId, long mapId, Output out) {
      List<ShuffleMessages.Entry> entries = new ArrayList<>();
      long at = l.base();
      for (int p = 0; p < out.bytes().length; p++) {
        long capacity = (Math.max(16, out.bytes()[p].length) + 15) & ~15L;
        entries.add(new ShuffleMessages.Entry(mapId, p, 0, capacity, at));
        at += capacity;
      }
      long signal = (at + BlockTable.bytes(entries.size()) + 15) & ~15L;
      return new WriteRequest(reader().nextRequestId(), shuffleId, reader().identity(), 30_000, l.region(), at, signal,
          entries, widths(), WriteRequest.ANSWER_SERVED);
    }

    WriteResult send(WriteRequest req) throws Exception {
      return reader().writeExchange().send(holder().localEndpoint(), req, null, java.time.Duration.ofSeconds(30))
          .get(40, java.util.concurrent.TimeUnit.SECONDS);
    }

    private void deliver(NicOffer o) {
      relay.execute(() -> (o.to().equals("reader") ? readerLinks : holderLinks).offered(o));
    }

    @Override
    public MemoryKind kind() {
      return MemoryKind.DEVICE;
    }

    @Override
    public int[] widths() {
      return PushServingConformanceGpuTest.GpuOutputs.W.clone();
    }

    @Override
    public Output commit(int shuffleId, long mapId, int[] sizes) {
      return outputs.commit(shuffleId, mapId, sizes);
    }

    @Override
    public Landing landing(long length) {
      long base = next;
      next += (length + 255) & ~255L;
      if (next > landing.capacity()) {
        throw new IllegalStateException("link rig: landing region of " + landing.capacity() + " bytes used up");
      }
      return new Landing() {
        @Override
        public RegionDescriptor region() {
          return nicLanding.descriptor(0);
        }

        @Override
        public long base() {
          return base;
        }

        @Override
        public byte[] read(long offset, int len) {
          return landing.region().read(offset, len);
        }
      };
    }

    @Override
    public void loseReader() {
      nodes.loseReader();
      server.forget(nicLanding.descriptor(0));
      holderLinks.peerLost("reader");
    }

    @Override
    public void close() {
      nodes.close();
      relay.shutdownNow();
      // The context (in outputs) goes after everything made on it; each NIC after what it registered.
      for (AutoCloseable c : new AutoCloseable[] {server, holderLinks, readerLinks, landing, kernel, outputs,
          holderNic, readerNic}) {
        try {
          c.close();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
    }
  }
}
