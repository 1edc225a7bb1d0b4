package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The device map-output store's accounting, spilling, pinning and freeing, over host memory. */
class DeviceMapOutputStoreTest {
  private static final int[] W = {4};

  /** Commits one output of two partitions (rows r0, r1) filled with {@code fill}. */
  private static void put(DeviceMapOutputStore s, int shuffle, long map, int r0, int r1, byte fill) {
    long b0 = BatchLayout.packedBytes(r0, W);
    long b1 = BatchLayout.packedBytes(r1, W);
    OutputSpace.Block b = s.allocate(b0 + b1);
    byte[] bytes = new byte[(int) (b0 + b1)];
    java.util.Arrays.fill(bytes, fill);
    b.write(0, bytes, 0, bytes.length);
    s.commit(shuffle, map, b, W, new long[] {0, b0, b0 + b1}, new long[] {r0, r1});
  }

  @Test
  void deviceAndSpilledBytesAreAccountedInTheCallersPoolsAndALeakFailsTheirClose() {
    HostOutputSpace space = new HostOutputSpace();
    dev.slipstream.core.memory.MemoryPool root = dev.slipstream.core.memory.MemoryPool.root("node", Long.MAX_VALUE);
    dev.slipstream.core.memory.MemoryPool gpu = root.child("gpu-0", Long.MAX_VALUE);
    DeviceMapOutputStore s = new DeviceMapOutputStore(space, gpu.child("map-output", 128),
        gpu.child("map-output-spilled", 1024));
    put(s, 1, 10, 2, 2, (byte) 1);
    put(s, 1, 11, 2, 2, (byte) 2);
    put(s, 1, 12, 2, 2, (byte) 3); // map 10 spills to host
    assertEquals(128 + 64, root.used(), "device and spilled bytes both in the node's tree");
    assertEquals(64, s.hostInUse());
    OutputSpace.Block forgotten = s.allocate(32); // a map task that neither commits nor closes it
    assertTrue(forgotten.length() >= 32);
    s.close();
    IllegalStateException e = assertThrows(IllegalStateException.class, gpu::close);
    assertTrue(e.getMessage().startsWith("memory still reserved at close: node/gpu-0/map-output="), e.getMessage());
  }

  @Test
  void spillsTheOldestUnpinnedOutputToHostAndRestoresItForAPush() {
    HostOutputSpace space = new HostOutputSpace();
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(space, 256, 1024)) {
      put(s, 1, 10, 2, 2, (byte) 1); // 2 x 32 bytes
      put(s, 1, 11, 2, 2, (byte) 2);
      put(s, 1, 12, 2, 2, (byte) 3);
      put(s, 1, 13, 2, 2, (byte) 4);
      assertEquals(256, s.deviceInUse());
      assertEquals(0, s.spills());
      put(s, 2, 20, 2, 2, (byte) 5); // needs 64 more: map 10 goes to host
      assertEquals(1, s.spills());
      assertEquals(64, s.hostInUse());
      assertEquals(256, s.deviceInUse());
      assertEquals(256, space.live());
      try (DeviceMapOutputStore.Pinned p = s.pin(1, 10)) { // back on the device: map 11 spills
        assertEquals(1, s.restores());
        assertEquals(2, s.spills());
        byte[] got = new byte[32];
        p.block().read(p.offset(1), got, 0, 32);
        assertArrayEquals(filled(32, (byte) 1), got);
        assertEquals(2, p.rows(1));
        assertEquals(32, p.bytes(1));
      }
    }
    assertEquals(0, space.live());
  }

  @Test
  void aPinnedOutputStaysAndABudgetThatCannotBeMetNamesBothBudgets() {
    HostOutputSpace space = new HostOutputSpace();
    DeviceMapOutputStore s = new DeviceMapOutputStore(space, 128, 0);
    put(s, 1, 10, 2, 2, (byte) 1);
    DeviceMapOutputStore.Pinned p = s.pin(1, 10);
    put(s, 1, 11, 2, 2, (byte) 2);
    var e = assertThrows(IllegalStateException.class, () -> s.allocate(64));
    assertEquals("device map-output store: 64 bytes do not fit: 128 of 128 device bytes in use by outputs that pushes"
        + " are reading, or the host budget of 0 bytes (0 in use) is spent", e.getMessage());
    assertEquals("device map output of 129 bytes, expected 1..128 (spark.slipstream.gpu.mapOutput.memoryBytes)",
        assertThrows(IllegalArgumentException.class, () -> s.allocate(129)).getMessage());
    assertEquals(2, s.removeShuffle(1));
    assertEquals(64, s.deviceInUse(), "the pinned output stays until its push ends");
    p.close();
    assertEquals(0, s.deviceInUse());
    assertEquals(0, space.live());
    s.close();
  }

  @Test
  void uncommittedBlocksReturnTheirMemoryAndCommitsAreChecked() {
    HostOutputSpace space = new HostOutputSpace();
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(space, 1024, 0)) {
      OutputSpace.Block b = s.allocate(100);
      var e = assertThrows(IllegalArgumentException.class,
          () -> s.commit(1, 1, b, W, new long[] {0, 32, 120}, new long[] {1, 1}));
      assertEquals("map output 1/1: partition 1 at [32, 120) with 1 rows, expected at least 32 bytes within the block"
          + " of 100", e.getMessage());
      b.close();
      assertEquals(0, s.deviceInUse());
      assertEquals(0, space.live());
      assertFalse(s.contains(1, 1));
      assertEquals("no device map output for shuffle 1 map attempt 1 on this executor",
          assertThrows(IllegalStateException.class, () -> s.pin(1, 1)).getMessage());
      put(s, 3, 30, 1, 0, (byte) 9);
      assertTrue(s.removeMapOutput(3, 30));
      assertFalse(s.removeMapOutput(3, 30));
      assertEquals(0, space.live());
    }
  }

  @Test
  void closeFreesEverythingAndFailsLoudlyWhileAPushHoldsAnOutput() {
    HostOutputSpace space = new HostOutputSpace();
    DeviceMapOutputStore s = new DeviceMapOutputStore(space, 1024, 1024);
    put(s, 1, 10, 2, 2, (byte) 1);
    s.pin(1, 10);
    var e = assertThrows(IllegalStateException.class, s::close);
    assertEquals("device map-output store closed while 1 push(es) still held outputs", e.getMessage());
    assertEquals(0, space.live());
    s.close(); // idempotent
  }

  private static byte[] filled(int n, byte v) {
    byte[] b = new byte[n];
    java.util.Arrays.fill(b, v);
    return b;
  }

  /** What a {@link DeviceResidency} was told, one line each. */
  private static final class Told implements DeviceResidency {
    final java.util.List<String> lines = new java.util.ArrayList<>();

    @Override
    public void arrived(int shuffleId, long mapAttemptId, OutputSpace.Block block, long[] offsets, long[] counts) {
      lines.add("arrived " + shuffleId + "/" + mapAttemptId + " " + java.util.Arrays.toString(offsets) + " "
          + java.util.Arrays.toString(counts));
    }

    @Override
    public void leaving(int shuffleId, long mapAttemptId) {
      lines.add("leaving " + shuffleId + "/" + mapAttemptId);
    }

    java.util.List<String> take() {
      java.util.List<String> l = java.util.List.copyOf(lines);
      lines.clear();
      return l;
    }
  }

  @Test
  void aResidencyFollowsEveryOutputIntoAndOutOfDeviceMemory() {
    DeviceMapOutputStore s = new DeviceMapOutputStore(new HostOutputSpace(), 128, 1024);
    Told told = new Told();
    put(s, 1, 10, 2, 2, (byte) 1);
    s.follow(told);
    assertEquals(java.util.List.of("arrived 1/10 [0, 32, 64] [2, 2]"), told.take(), "outputs there already");
    put(s, 1, 11, 2, 2, (byte) 2);
    assertEquals(java.util.List.of("arrived 1/11 [0, 32, 64] [2, 2]"), told.take(), "a commit");
    put(s, 1, 12, 2, 2, (byte) 3);
    assertEquals(java.util.List.of("leaving 1/10", "arrived 1/12 [0, 32, 64] [2, 2]"), told.take(),
        "a spill leaves before the new output arrives");
    try (DeviceMapOutputStore.Pinned p = s.pin(1, 10)) {
      assertEquals(java.util.List.of("leaving 1/11", "arrived 1/10 [0, 32, 64] [2, 2]"), told.take(),
          "bringing a spilled output back spills the oldest and arrives again");
      assertTrue(s.removeMapOutput(1, 10));
      assertEquals(java.util.List.of("leaving 1/10"), told.take(), "a removed output leaves while still pinned");
    }
    assertEquals(java.util.List.of(), told.take(), "its deferred free says nothing more");
    put(s, 1, 12, 2, 2, (byte) 4);
    assertEquals(java.util.List.of("leaving 1/12", "arrived 1/12 [0, 32, 64] [2, 2]"), told.take(),
        "a committed attempt replaces the one before");
    assertEquals(2, s.removeShuffle(1), "outputs 11 (spilled) and 12");
    assertEquals(java.util.List.of("leaving 1/12"), told.take(), "only what was in device memory leaves");
    put(s, 2, 20, 2, 2, (byte) 5);
    told.take();
    s.follow(null);
    assertEquals(java.util.List.of("leaving 2/20"), told.take(), "nobody follows any more");
    put(s, 2, 21, 2, 2, (byte) 6);
    assertEquals(java.util.List.of(), told.take());
    s.close();
  }

}
