package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.slipstream.core.shuffle.ChecksumAlgorithm;
import dev.slipstream.gpu.GpuProbe;
import dev.slipstream.gpu.GpuRuntime;
import dev.slipstream.testkit.HostLandingRig;
import dev.slipstream.testkit.ServingConformanceSuite;
import dev.slipstream.testkit.ServingRig;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The serving conformance suite for the staging writer: GPU map outputs in the holder's device
 * store, copied to host memory by the holder and written over the transport (loopback) into the reader's
 * host landing ranges ({@link StagedBlocks#source}), each block in its served form (packed bytes,
 * then rows and magic). Skips with the probe's reason without a GPU.
 */
class StagedServingConformanceGpuTest extends ServingConformanceSuite {
  @Override
  protected ServingRig newRig() throws Exception {
    GpuProbe p = GpuRuntime.probe();
    assumeTrue(p.available(), p.reason());
    return new StagedRig();
  }

  private static final class StagedRig extends HostLandingRig {
    private final PushServingConformanceGpuTest.GpuOutputs outputs = new PushServingConformanceGpuTest.GpuOutputs();

    StagedRig() throws Exception {
      super("loopback");
      nodes.holder().serveAlso(StagedBlocks.source(outputs.store, ChecksumAlgorithm.NONE));
    }

    /** What lands is the served form: the packed bytes, then the rows and the magic (none for an empty block). */
    @Override
    public Output commit(int shuffleId, long mapId, int[] sizes) {
      Output packed = outputs.commit(shuffleId, mapId, sizes);
      byte[][] served = new byte[sizes.length][];
      for (int p = 0; p < sizes.length; p++) {
        byte[] b = packed.bytes()[p];
        served[p] = new byte[(int) StagedBlocks.servedLength(b.length)];
        if (b.length > 0) {
          ByteBuffer.wrap(served[p]).order(ByteOrder.LITTLE_ENDIAN).put(b).putLong(packed.rows()[p])
              .putLong(StagedBlocks.MAGIC);
        }
      }
      return new Output(served, new long[sizes.length]);
    }

    @Override
    public void close() throws Exception {
      super.close();
      outputs.close();
    }
  }
}
