package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.gpu.Backend;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuProbe;
import dev.slipstream.gpu.GpuRuntime;
import dev.slipstream.gpu.PushKernel;
import dev.slipstream.gpu.RemoteRegion;
import dev.slipstream.testkit.NodeRig;
import dev.slipstream.testkit.ServingConformanceSuite;
import dev.slipstream.testkit.ServingRig;
import java.util.Optional;
import java.util.SplittableRandom;

/**
 * The serving conformance suite for the block writer into device memory ({@link PushWriter}: the
 * nvlink push lanes), on one GPU: the holder's map outputs in its device store, the reader's
 * device landing region aliased into the holder's lanes (one process; the CUDA IPC import's own
 * checks are ImportedLandingGpuTest's). Skips with the probe's reason without a GPU.
 */
class PushServingConformanceGpuTest extends ServingConformanceSuite {
  @Override
  protected ServingRig newRig() throws Exception {
    GpuProbe p = GpuRuntime.probe();
    assumeTrue(p.available(), p.reason());
    return new DeviceRig(Backend.NVLINK);
  }

  /** The GPU side both device rigs share: a context, the holder's device store, map outputs committed there. */
  static class GpuOutputs implements AutoCloseable {
    static final int[] W = {8};
    final GpuContext ctx;
    final DeviceMapOutputStore store;

    GpuOutputs() {
      this(null);
    }

    /** {@code nic}: where every map output is registered too (null: none). */
    GpuOutputs(NicRegistrar nic) {
      ctx = GpuContext.open(0);
      store = new DeviceMapOutputStore(new GpuOutputSpace(ctx, 3000, nic), 256L << 20, 0);
    }

    /** Partition p gets sizes[p] / 16 rows of the packed layout (8-byte keys and one 8-byte column), random bytes. */
    ServingRig.Output commit(int shuffleId, long mapId, int[] sizes) {
      int n = sizes.length;
      long[] counts = new long[n];
      long[] offsets = new long[n + 1];
      for (int p = 0; p < n; p++) {
        counts[p] = sizes[p] / 16;
        offsets[p + 1] = offsets[p] + BatchLayout.packedBytes(counts[p], W);
      }
      OutputSpace.Block block = store.allocate(Math.max(16, offsets[n]));
      SplittableRandom r = new SplittableRandom(mapId * 31 + shuffleId);
      byte[][] bytes = new byte[n][];
      for (int p = 0; p < n; p++) {
        bytes[p] = new byte[(int) (offsets[p + 1] - offsets[p])];
        r.nextBytes(bytes[p]);
        block.write(offsets[p], bytes[p], 0, bytes[p].length);
      }
      store.commit(shuffleId, mapId, block, W, offsets, counts);
      return new ServingRig.Output(bytes, counts);
    }

    @Override
    public void close() {
      store.close();
      ctx.close();
    }
  }

  /**
   * The holder's push lanes over queues of one backend, into the reader's landing region
   * (ResidentServingConformanceGpuTest's rig serves through the resident kernel first, and falls
   * back to these lanes as the product does).
   */
  static class DeviceRig extends NodeRig {
    final GpuOutputs outputs;
    private final PushKernel kernel;
    final DeviceLanding landing;
    final RemoteRegion view;
    private final PushScheduler server;
    private long next;

    DeviceRig(Backend backend) throws Exception {
      this(backend, null);
    }

    /** {@code nic}: where the holder's map outputs are registered too (null: none). */
    DeviceRig(Backend backend, NicRegistrar nic) throws Exception {
      super("loopback");
      outputs = new GpuOutputs(nic);
      kernel = PushKernel.load(outputs.ctx);
      landing = new DeviceLanding(outputs.ctx, 96L << 20, 1);
      view = RemoteRegion.alias(landing.region());
      server = new PushScheduler(outputs.ctx, kernel, outputs.store, d -> view, 1 << 20, 4,
          PushScheduler.Lanes.of(backend));
      GpuEndpoint self = new GpuEndpoint("host/boot", 0, "p", "u", landing.export());
      PeerLandings landings = new PeerLandings("holder", self, id -> id.equals("reader") && nodes.readerKnown()
          ? Optional.of(new PeerLandings.Peer(nodes.reader().localEndpoint(), Optional.of(self))) : Optional.empty());
      nodes.holder().setWriter(MemoryKind.DEVICE, new PushWriter(server, landings, x -> view, 30_000));
    }

    @Override
    public MemoryKind kind() {
      return MemoryKind.DEVICE;
    }

    @Override
    public int[] widths() {
      return GpuOutputs.W.clone();
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
        throw new IllegalStateException("device rig: landing region of " + landing.capacity() + " bytes used up");
      }
      return new Landing() {
        @Override
        public RegionDescriptor region() {
          return landing.export().descriptor();
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
      server.forget(landing.export().descriptor()); // its lanes close once their pushes ended
    }

    @Override
    public void close() {
      nodes.close();
      for (AutoCloseable c : new AutoCloseable[] {server, view, landing, kernel, outputs}) {
        try {
          c.close();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
    }
  }
}
