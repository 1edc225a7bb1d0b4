package dev.slipstream.core.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class RangeAllocatorTest {
  @Test
  void handsOutWholeUnitsFirstFitAndCoalescesOnGive() {
    RangeAllocator a = new RangeAllocator(10 * 4096 + 100, 4096);
    assertEquals(10 * 4096, a.capacity(), "rounded down to whole units");
    long x = a.take(1);
    long y = a.take(4097);
    long z = a.take(4096);
    assertEquals(0, x);
    assertEquals(4096, y);
    assertEquals(3 * 4096, z);
    assertEquals(4 * 4096, a.used());
    a.give(y, 2 * 4096);
    assertEquals(4096, a.take(4096), "the lowest hole that fits");
    a.give(4096, 4096);
    a.give(x, 4096);
    a.give(z, 4096);
    assertEquals(0, a.used());
    assertEquals(10 * 4096, a.largestFree(), "every range merged back into one");
    assertEquals(4 * 4096, a.peak());
  }

  @Test
  void refusesWhatDoesNotFit() {
    RangeAllocator a = new RangeAllocator(4 * 4096, 4096);
    assertEquals(-1, a.take(5 * 4096));
    long x = a.take(2 * 4096);
    a.take(4096);
    a.give(x, 2 * 4096);
    assertEquals(-1, a.take(3 * 4096), "three units free, but not in one range");
    assertEquals(0, a.take(2 * 4096));
  }

  @Test
  void aRangeGivenTwiceOrForgedIsRefusedAndNothingChanges() {
    RangeAllocator a = new RangeAllocator(8 * 4096, 4096);
    long x = a.take(4096);
    a.take(4096);
    a.give(x, 4096);
    assertEquals("range 0+4096 overlaps free space (given back twice, or never taken)",
        assertThrows(IllegalArgumentException.class, () -> a.give(0, 4096)).getMessage());
    assertEquals("range 4096+8192 overlaps free space (given back twice, or never taken)",
        assertThrows(IllegalArgumentException.class, () -> a.give(4096, 8192)).getMessage());
    assertEquals("range 100+4096 is not a range of whole 4096-byte units inside [0, 32768)",
        assertThrows(IllegalArgumentException.class, () -> a.give(100, 4096)).getMessage());
    assertEquals("range 28672+8192 is not a range of whole 4096-byte units inside [0, 32768)",
        assertThrows(IllegalArgumentException.class, () -> a.give(7 * 4096, 8192)).getMessage());
    assertEquals(4096, a.used());
    assertEquals(6 * 4096, a.largestFree());
  }

  @Test
  void exactSizesWithAUnitOfOneByteStayConsistentUnderRandomUse() {
    RangeAllocator a = new RangeAllocator(1 << 20, 1);
    Random r = new Random(7);
    List<long[]> held = new ArrayList<>();
    long sum = 0;
    for (int i = 0; i < 20_000; i++) {
      if (held.isEmpty() || r.nextInt(3) > 0) {
        long len = 1 + r.nextInt(9000);
        long at = a.take(len);
        if (at >= 0) {
          for (long[] h : held) {
            if (at < h[0] + h[1] && h[0] < at + len) {
              throw new AssertionError("range " + at + "+" + len + " overlaps held " + h[0] + "+" + h[1]);
            }
          }
          held.add(new long[] {at, len});
          sum += len;
        }
      } else {
        long[] h = held.remove(r.nextInt(held.size()));
        a.give(h[0], h[1]);
        sum -= h[1];
      }
      assertEquals(sum, a.used());
    }
    held.forEach(h -> a.give(h[0], h[1]));
    assertEquals(1 << 20, a.largestFree());
  }
}
