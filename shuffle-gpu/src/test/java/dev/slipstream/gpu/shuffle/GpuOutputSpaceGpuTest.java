package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuProbe;
import dev.slipstream.gpu.GpuRuntime;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Map outputs are blocks of slabs: blocks share a slab while it has room, a block larger than a
 * slab gets its own, a slab goes with its last block unless it is the newest, and with a NIC each
 * slab is registered once and deregistered when it goes. Skips with the probe's reason without a GPU.
 */
class GpuOutputSpaceGpuTest {
  /** Registrations as a NIC would hold them. */
  static final class CountingNic implements NicRegistrar {
    final Map<Integer, Integer> live = new HashMap<>();
    int registered;
    int next = 100;

    @Override
    public synchronized int register(long pointer, long length, int id) {
      registered++;
      live.put(id, next);
      return next++;
    }

    @Override
    public synchronized void deregister(int id, int mkey) {
      assertEquals(Integer.valueOf(mkey), live.remove(id), "deregistered with another key than registered");
    }
  }

  @Test
  void blocksShareSlabsAndEachSlabIsRegisteredOnce() {
    GpuProbe p = GpuRuntime.probe();
    assumeTrue(p.available(), p.reason());
    CountingNic nic = new CountingNic();
    try (GpuContext ctx = GpuContext.open(0)) {
      GpuOutputSpace space = new GpuOutputSpace(ctx, 7000, nic, 1 << 20);
      GpuOutputSpace.SlabBlock a = space.allocate(300_000);
      GpuOutputSpace.SlabBlock b = space.allocate(300_000);
      assertSame(a.region(), b.region(), "two blocks that fit one slab");
      assertEquals(0, a.base());
      assertTrue(b.base() >= 300_000 && b.base() % 256 == 0, "base " + b.base());
      assertEquals(a.region().devicePointer() + b.base(), b.address());
      GpuOutputSpace.SlabBlock big = space.allocate(3 << 20);
      assertNotEquals(a.region(), big.region(), "a block larger than a slab");
      assertEquals(2, space.slabs());
      assertEquals(2, nic.registered);
      byte[] bytes = new byte[4096];
      for (int i = 0; i < bytes.length; i++) {
        bytes[i] = (byte) (i * 7 + 1);
      }
      b.write(1000, bytes, 0, bytes.length);
      byte[] back = new byte[bytes.length];
      b.read(1000, back, 0, back.length);
      assertArrayEquals(bytes, back);
      assertArrayEquals(bytes, a.region().read(b.base() + 1000, bytes.length), "at the block's base in its slab");
      assertThrows(IndexOutOfBoundsException.class, () -> b.write(300_000 - 8, new byte[16], 0, 16));
      // The big block's slab is the newest: it stays when its block goes; the first goes with its last block.
      big.close();
      assertEquals(2, space.slabs());
      a.close();
      assertEquals(2, space.slabs(), "a block is left in the first slab");
      b.close();
      b.close();  // twice: once counts
      assertEquals(1, space.slabs());
      assertEquals(1, nic.live.size(), "the freed slab was deregistered");
      GpuOutputSpace.SlabBlock c = space.allocate(1 << 20);
      assertEquals(2, nic.registered, "a block that fits the kept slab registers nothing");
      c.close();
      space.close();
      assertEquals(0, space.slabs());
      assertTrue(nic.live.isEmpty(), "every slab deregistered");
      assertThrows(IllegalStateException.class, () -> space.allocate(16));
    }
  }
}
