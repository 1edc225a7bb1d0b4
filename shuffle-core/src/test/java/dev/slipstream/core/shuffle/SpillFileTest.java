package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SpillFileTest {
  @TempDir Path tmp;

  private static byte[] gather(List<ByteBuffer> views) {
    int n = views.stream().mapToInt(ByteBuffer::remaining).sum();
    byte[] out = new byte[n];
    int at = 0;
    for (ByteBuffer b : views) {
      int k = b.remaining();
      b.duplicate().get(out, at, k);
      at += k;
    }
    return out;
  }

  @Test
  void appendsReturnTheirOffsetsAndViewsCrossWindowBoundariesInPieces() throws Exception {
    byte[] data = new byte[10_000];
    new Random(3).nextBytes(data);
    SpillFile f = SpillFile.create(tmp.resolve("a.data"), 4096); // windows of 4 KiB: 3 mappings
    assertEquals(0, f.append(ByteBuffer.wrap(data, 0, 3000)));
    assertEquals(3000, f.append(ByteBuffer.allocateDirect(7000).put(data, 3000, 7000).flip()));
    assertEquals(10_000, f.size());
    f.finish();
    assertArrayEquals(data, gather(f.slices(0, 10_000)));
    List<ByteBuffer> across = f.slices(4000, 200); // 96 bytes of the first window, 104 of the second
    assertEquals(2, across.size());
    assertEquals(96, across.get(0).remaining());
    assertArrayEquals(java.util.Arrays.copyOfRange(data, 4000, 4200), gather(across));
    assertArrayEquals(java.util.Arrays.copyOfRange(data, 9000, 10_000), gather(f.slices(9000, 1000)));
    assertEquals(1, f.slices(8192, 1808).size(), "a view that starts at a window boundary is one piece");
  }

  @Test
  void appendsAfterFinishAndReadsBeforeItAreRefused() throws Exception {
    SpillFile f = SpillFile.create(tmp.resolve("b.data"), 4096);
    f.append(ByteBuffer.wrap(new byte[10]));
    IllegalStateException early = assertThrows(IllegalStateException.class, () -> f.slices(0, 10));
    assertEquals("spill file " + tmp.resolve("b.data") + " is read before its writer finished it", early.getMessage());
    f.finish();
    f.finish(); // idempotent
    IllegalStateException late = assertThrows(IllegalStateException.class, () -> f.append(ByteBuffer.wrap(new byte[1])));
    assertEquals("spill file " + tmp.resolve("b.data") + " is finished; no more appends", late.getMessage());
    assertThrows(IllegalArgumentException.class, () -> SpillFile.create(tmp.resolve("c.data"), 0));
  }
}
