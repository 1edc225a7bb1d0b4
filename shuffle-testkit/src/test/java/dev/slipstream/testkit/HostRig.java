package dev.slipstream.testkit;

import dev.slipstream.core.shuffle.MapOutputWriter;
import java.io.OutputStream;
import java.util.SplittableRandom;

/** The host block writer's rig: map outputs in the holder's store, random bytes per partition. */
final class HostRig extends HostLandingRig {
  HostRig(String transport) throws Exception {
    super(transport);
  }

  @Override
  public Output commit(int shuffleId, long mapId, int[] sizes) throws Exception {
    SplittableRandom r = new SplittableRandom(mapId * 31 + shuffleId);
    byte[][] data = new byte[sizes.length][];
    MapOutputWriter w = nodes.holder().store().newOutput(shuffleId, mapId, sizes.length);
    for (int p = 0; p < sizes.length; p++) {
      data[p] = new byte[sizes[p]];
      r.nextBytes(data[p]);
      if (sizes[p] > 0) {
        try (OutputStream o = w.openPartition(p)) {
          o.write(data[p]);
        }
      }
    }
    w.commit();
    return new Output(data, new long[sizes.length]);
  }
}
