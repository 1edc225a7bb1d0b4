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
  void anOutputBegunBeforeItsShuffleWasRemovedIsFreedAndOneBegunAfterIsKept() {
    HostOutputSpace space = new HostOutputSpace();
    DeviceMapOutputStore s = new DeviceMapOutputStore(space, 256, 0);
    put(s, 1, 10, 2, 2, (byte) 1);
    long taskBegan = s.removalMark();
    OutputSpace.Block early = s.allocate(64); // a map task of a stage Spark was cancelling
    assertEquals(1, s.removeShuffle(1));
    OutputSpace.Block late = s.allocate(64); // that task's block, allocated after the removal
    s.commit(1, 11, early, W, new long[] {0, 32, 64}, new long[] {2, 2});
    s.commit(1, 12, late, W, new long[] {0, 32, 64}, new long[] {2, 2}, taskBegan);
    assertFalse(s.contains(1, 11), "block allocated before the removal");
    assertFalse(s.contains(1, 12), "writer begun before the removal");
    assertEquals(0, s.deviceInUse());
    assertEquals(0, space.live(), "their blocks went back");
    // Spark registers a removed shuffle again under its id when the cleaned-up plan runs again.
    put(s, 1, 13, 2, 2, (byte) 3);
    assertTrue(s.contains(1, 13), "an output begun after the removal is kept");
    try (DeviceMapOutputStore.Pinned p = s.pin(1, 13)) {
      byte[] got = new byte[32];
      p.block().read(p.offset(1), got, 0, 32);
      assertArrayEquals(filled(32, (byte) 3), got);
    }
    s.close();
  }

  @Test
  void aPinnedOutputStaysAndABudgetThatCannotBeMetNamesBothBudgets() {
    HostOutputSpace space = new HostOutputSpace();
    DeviceMapOutputStore s = new DeviceMapOutputStore(space, 128, 0);
    put(s, 1, 10, 2, 2, (byte) 1);
    DeviceMapOutputStore.Pinned p = s.pin(1, 10);
    put(s, 1, 11, 2, 2, (byte) 2);
    var e = assertThrows(IllegalStateException.class, () -> s.allocate(64));
    assertEquals("device map-output store: 64 bytes do not fit: 128 of 128 device bytes in use by outputs that map"
        + " tasks are writing or that readers and pushes hold, or the host budget of 0 bytes (0 in use) is spent and"
        + " there is no spill folder",
        e.getMessage());
    assertEquals("device map output of 129 bytes, expected 1..128 (spark.slipstream.gpu.mapOutput.memoryBytes)",
        assertThrows(IllegalArgumentException.class, () -> s.allocate(129)).getMessage());
    assertEquals(2, s.removeShuffle(1));
    assertEquals(64, s.deviceInUse(), "the pinned output stays until its push ends");
    p.close();
    assertEquals(0, s.deviceInUse());
    assertEquals(0, space.live());
    s.close();
  }

  /** Host space standing in for a GPU of {@code capacity} bytes that others share: it refuses as cudaMalloc does. */
  private static final class SharedGpu implements OutputSpace {
    final HostOutputSpace inner = new HostOutputSpace();
    long capacity;

    SharedGpu(long capacity) {
      this.capacity = capacity;
    }

    @Override
    public Block allocate(long bytes) {
      if (inner.live() + bytes > capacity) {
        throw new dev.slipstream.gpu.GpuException(dev.slipstream.gpu.SlipStatus.SLIP_ERR_CUDA,
            "cudaMalloc(" + bytes + "): cudaErrorMemoryAllocation: out of memory");
      }
      return inner.allocate(bytes);
    }
  }

  @Test
  void whenTheGpuRefusesWithinTheBudgetOlderOutputsMoveOutAndNothingIsLost() {
    SharedGpu gpu = new SharedGpu(1024);
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(gpu, 1024, 1024)) {
      put(s, 1, 10, 2, 2, (byte) 1); // 64 bytes each
      put(s, 1, 11, 2, 2, (byte) 2);
      put(s, 1, 12, 2, 2, (byte) 3);
      gpu.capacity = 192; // another user of the GPU took the rest: the budget has room, the device has none
      try (DeviceMapOutputStore.Pinned held = s.pin(1, 12)) { // a push reads map 12: it stays
        put(s, 2, 20, 2, 2, (byte) 4); // the oldest, map 10, moves to host memory; then the GPU takes it
        assertEquals(1, s.spills());
        assertEquals(64, s.hostInUse());
        put(s, 2, 21, 4, 4, (byte) 5); // 96 bytes: maps 11 and 20 move out, 12 is held
        assertEquals(3, s.spills());
        assertEquals(64 + 96, gpu.inner.live());
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> s.allocate(512));
        assertTrue(e.getMessage().startsWith("device map-output store: the GPU refused 512 more bytes "
            + "(cudaMalloc(512): cudaErrorMemoryAllocation: out of memory) with 64 of the 1024 budgeted bytes"
            + " (spark.slipstream.gpu.mapOutput.memoryBytes) in use and 96 bytes of outputs moved"), e.getMessage());
        assertEquals(64, gpu.inner.live(), "the held output alone: the refused map task has nothing");
      }
      // Every output still reads back as written, wherever it went.
      gpu.capacity = 1 << 20;
      byte[] fills = {1, 2, 3, 4, 5};
      long[][] maps = {{1, 10}, {1, 11}, {1, 12}, {2, 20}, {2, 21}};
      for (int i = 0; i < maps.length; i++) {
        try (DeviceMapOutputStore.Pinned p = s.pin((int) maps[i][0], maps[i][1])) {
          int n = (int) (p.offset(p.partitions() - 1) + p.bytes(p.partitions() - 1) - p.offset(0));
          byte[] got = new byte[n];
          p.block().read(p.offset(0), got, 0, n);
          for (byte b : got) {
            assertEquals(fills[i], b, "map " + maps[i][1]);
          }
        }
      }
    }
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

  /** Reads partition p of a pinned output. */
  private static byte[] partition(DeviceMapOutputStore.Pinned p, int part) {
    byte[] got = new byte[(int) p.bytes(part)];
    p.block().read(p.offset(part), got, 0, got.length);
    return got;
  }

  private static long files(java.nio.file.Path dir) throws java.io.IOException {
    if (!java.nio.file.Files.isDirectory(dir)) {
      return 0;
    }
    try (var l = java.nio.file.Files.list(dir)) {
      return l.count();
    }
  }

  @Test
  void beyondTheHostBudgetTheOldestOutputsMoveToDiskAndComeBackIntact(@org.junit.jupiter.api.io.TempDir
      java.nio.file.Path tmp) throws Exception {
    java.nio.file.Path dir = tmp.resolve("spill");
    HostOutputSpace space = new HostOutputSpace();
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(space, 128, 64, dir)) {
      put(s, 1, 10, 2, 2, (byte) 1); // 64 bytes each
      put(s, 1, 11, 2, 2, (byte) 2);
      put(s, 1, 12, 2, 2, (byte) 3); // 10 -> host
      assertEquals(64, s.hostInUse());
      assertEquals(0, s.diskInUse());
      put(s, 1, 13, 2, 2, (byte) 4); // 11 needs host room: 10 moves on to disk first
      assertEquals(64, s.hostInUse());
      assertEquals(64, s.diskInUse());
      assertEquals(1, s.diskSpills());
      assertEquals(1, files(dir));
      assertEquals(128, s.deviceInUse());
      try (DeviceMapOutputStore.Pinned p = s.pin(1, 10)) { // from disk; 12 makes room: 11 on to disk, 12 to host
        assertArrayEquals(filled(32, (byte) 1), partition(p, 0));
        assertArrayEquals(filled(32, (byte) 1), partition(p, 1));
        assertEquals(2, p.rows(1));
      }
      assertEquals(1, s.restores());
      assertEquals(64, s.diskInUse(), "10's file went when it came back; 11's is there");
      assertFalse(s.onDevice(1, 11));
      assertEquals(1, files(dir));
      try (DeviceMapOutputStore.Pinned p = s.pin(1, 11)) { // from disk
        assertArrayEquals(filled(32, (byte) 2), partition(p, 1));
      }
      try (DeviceMapOutputStore.Pinned p = s.pin(1, 12)) { // from host memory or disk, as room was made
        assertArrayEquals(filled(32, (byte) 3), partition(p, 0));
      }
      assertEquals(4, s.outputCount());
      assertEquals(4, s.removeShuffle(1));
      assertEquals(0, s.diskInUse());
      assertEquals(0, s.hostInUse());
      assertEquals(0, files(dir), "removing a shuffle deletes its spill files");
      put(s, 2, 20, 2, 2, (byte) 5);
      put(s, 2, 21, 2, 2, (byte) 6);
      put(s, 2, 22, 2, 2, (byte) 7);
      put(s, 2, 23, 2, 2, (byte) 8);
      assertEquals(1, files(dir));
    }
    assertEquals(0, files(dir), "close deletes the spill files");
    assertEquals(0, space.live());
  }

  @Test
  void anOutputLargerThanTheHostBudgetGoesStraightToDisk(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) {
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(new HostOutputSpace(), 128, 0, dir)) {
      put(s, 1, 10, 2, 2, (byte) 1);
      put(s, 1, 11, 2, 2, (byte) 2);
      put(s, 1, 12, 2, 2, (byte) 3);
      assertEquals(0, s.hostInUse());
      assertEquals(64, s.diskInUse());
      assertFalse(s.onDevice(1, 10));
      try (DeviceMapOutputStore.Pinned p = s.pin(1, 10)) {
        assertArrayEquals(filled(32, (byte) 1), partition(p, 1));
      }
    }
  }

  @Test
  void aTruncatedSpillFileIsRefusedNamingItAndLeavesTheOutputOnDisk(@org.junit.jupiter.api.io.TempDir
      java.nio.file.Path dir) throws Exception {
    HostOutputSpace space = new HostOutputSpace();
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(space, 128, 0, dir)) {
      put(s, 1, 10, 2, 2, (byte) 1);
      put(s, 1, 11, 2, 2, (byte) 2);
      put(s, 1, 12, 2, 2, (byte) 3);
      java.nio.file.Path f;
      try (var l = java.nio.file.Files.list(dir)) {
        f = l.findFirst().orElseThrow();
      }
      try (var ch = java.nio.channels.FileChannel.open(f, java.nio.file.StandardOpenOption.WRITE)) {
        ch.truncate(40);
      }
      long device = s.deviceInUse();
      long live = space.live();
      var e = assertThrows(IllegalStateException.class, () -> s.pin(1, 10));
      assertEquals("device map output 1/10: spill file " + f + " holds 40 bytes, expected 64", e.getMessage());
      assertTrue(s.deviceInUse() <= device, "the block for the copy was returned");
      assertTrue(space.live() <= live);
      assertTrue(s.contains(1, 10));
    }
  }

  @Test
  void aSpillFolderThatCannotBeWrittenIsNamedWhenNothingFits(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
      throws Exception {
    java.nio.file.Path notADir = java.nio.file.Files.writeString(tmp.resolve("taken"), "a file");
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(new HostOutputSpace(), 128, 0, notADir)) {
      put(s, 1, 10, 2, 2, (byte) 1);
      put(s, 1, 11, 2, 2, (byte) 2);
      var e = assertThrows(IllegalStateException.class, () -> s.allocate(64));
      assertTrue(e.getMessage().startsWith("device map-output store: 64 bytes do not fit: 128 of 128 device bytes in use"
          + " by outputs that map tasks are writing or that readers and pushes hold, or the host budget of 0 bytes (0"
          + " in use) is spent and spilling to "
          + notADir + " failed: java.nio.file.FileAlreadyExistsException"), e.getMessage());
      assertTrue(s.onDevice(1, 10), "nothing moved");
      try (DeviceMapOutputStore.Pinned p = s.pin(1, 10)) {
        assertArrayEquals(filled(32, (byte) 1), partition(p, 0));
      }
    }
  }

  @Test
  void aLocalReaderCopiesOnePartitionOfASpilledOutputWithoutBringingItBack(@org.junit.jupiter.api.io.TempDir
      java.nio.file.Path dir) {
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(new HostOutputSpace(), 128, 64, dir)) {
      put(s, 1, 10, 2, 2, (byte) 1);
      put(s, 1, 11, 2, 2, (byte) 2);
      put(s, 1, 12, 2, 2, (byte) 3); // 10 -> host
      put(s, 1, 13, 2, 2, (byte) 4); // 10 -> disk, 11 -> host
      assertEquals(null, s.pinIfOnDevice(1, 10));
      assertEquals(null, s.pinIfOnDevice(1, 11));
      DeviceMapOutputStore.PartitionCopy fromDisk = s.readPartition(1, 10, 1);
      assertArrayEquals(filled(32, (byte) 1), fromDisk.bytes());
      assertEquals(2, fromDisk.rows());
      assertArrayEquals(W, fromDisk.widths());
      assertArrayEquals(filled(32, (byte) 2), s.readPartition(1, 11, 0).bytes());
      assertArrayEquals(filled(32, (byte) 4), s.readPartition(1, 13, 1).bytes(), "from the device");
      assertEquals(0, s.restores(), "nothing came back");
      assertEquals(64, s.diskInUse());
      try (DeviceMapOutputStore.Pinned p = s.pinIfOnDevice(1, 13)) {
        assertArrayEquals(filled(32, (byte) 4), partition(p, 0));
      }
      assertEquals("device map output 1/13: partition 2, expected 0..1",
          assertThrows(IllegalStateException.class, () -> s.readPartition(1, 13, 2)).getMessage());
      assertEquals("no device map output for shuffle 1 map attempt 99 on this executor",
          assertThrows(IllegalStateException.class, () -> s.pinIfOnDevice(1, 99)).getMessage());
    }
  }

  @Test
  void aPushOfASpilledOutputWaitsForRoomUntilItsDeadline() throws Exception {
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(new HostOutputSpace(), 128, 1024)) {
      put(s, 1, 10, 2, 2, (byte) 1);
      put(s, 1, 11, 2, 2, (byte) 2);
      put(s, 1, 12, 2, 2, (byte) 3); // 10 -> host
      DeviceMapOutputStore.Pinned a = s.pin(1, 11);
      DeviceMapOutputStore.Pinned b = s.pin(1, 12);
      long t0 = System.nanoTime();
      var e = assertThrows(IllegalStateException.class, () -> s.pin(1, 10, System.nanoTime() + 50_000_000L));
      assertTrue(System.nanoTime() - t0 >= 40_000_000L, "it waited for its deadline");
      assertTrue(e.getMessage().startsWith("device map-output store: 64 bytes do not fit"), e.getMessage());
      java.util.concurrent.CompletableFuture<byte[]> got = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
        try (DeviceMapOutputStore.Pinned p = s.pin(1, 10, System.nanoTime() + 10_000_000_000L)) {
          return partition(p, 1);
        }
      });
      Thread.sleep(50);
      assertFalse(got.isDone(), "waiting while both other outputs are pinned");
      a.close(); // 11 can move to host now
      assertArrayEquals(filled(32, (byte) 1), got.get(10, java.util.concurrent.TimeUnit.SECONDS));
      b.close();
    }
  }

  @Test
  void aMapTaskWaitsForBlocksOthersAreStillWritingUntilItsDeadline() throws Exception {
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(new HostOutputSpace(), 128, 1024)) {
      OutputSpace.Block a = s.allocate(64); // two map tasks writing
      OutputSpace.Block b = s.allocate(64);
      var e = assertThrows(IllegalStateException.class, () -> s.allocate(64, System.nanoTime() + 30_000_000L));
      assertTrue(e.getMessage().startsWith("device map-output store: 64 bytes do not fit: 128 of 128"), e.getMessage());
      java.util.concurrent.CompletableFuture<OutputSpace.Block> third = java.util.concurrent.CompletableFuture
          .supplyAsync(() -> s.allocate(64, System.nanoTime() + 10_000_000_000L));
      Thread.sleep(50);
      assertFalse(third.isDone(), "both blocks are still being written");
      assertEquals(0, s.pinnedBytes());
      s.commit(1, 10, a, W, new long[] {0, 32, 64}, new long[] {2, 2}); // committed: movable
      OutputSpace.Block c = third.get(10, java.util.concurrent.TimeUnit.SECONDS);
      assertEquals(1, s.spills(), "the committed output moved to host memory for it");
      c.close();
      b.close();
      assertEquals(0, s.deviceInUse());
      try (DeviceMapOutputStore.Pinned p = s.pin(1, 10)) {
        assertEquals(64, s.pinnedBytes());
        assertArrayEquals(new byte[32], partition(p, 0));
      }
      assertEquals(128, s.deviceBudget());
    }
  }

  @Test
  void aPushOfASpilledOutputBringsBackOnlyTheSpanOfItsPartitions(@org.junit.jupiter.api.io.TempDir
      java.nio.file.Path dir) {
    HostOutputSpace space = new HostOutputSpace();
    try (DeviceMapOutputStore s = new DeviceMapOutputStore(space, 768, 0, dir)) {
      // Four partitions of 8 rows (128 bytes each, 512 in all), each filled with its partition number.
      long part = 128; // at least BatchLayout.packedBytes(8, W)
      for (long map = 10; map <= 11; map++) {
        OutputSpace.Block b = s.allocate(4 * part);
        for (int p = 0; p < 4; p++) {
          b.write(p * part, filled((int) part, (byte) (p + 1)), 0, (int) part);
        }
        s.commit(1, map, b, W, new long[] {0, part, 2 * part, 3 * part, 4 * part}, new long[] {8, 8, 8, 8});
      }
      assertFalse(s.onDevice(1, 10), "512 + 512 > 768: map 10 went to disk");
      long before = s.deviceInUse();
      try (DeviceMapOutputStore.Pinned p = s.pin(1, 10, 2, 3, System.nanoTime() + 1_000_000_000L)) {
        assertEquals(before + 256, s.deviceInUse(), "partitions 2 and 3 only");
        assertEquals(256, s.pinnedBytes(), "the span is pinned while its push runs");
        assertEquals(4, p.partitions());
        assertEquals(128, p.bytes(2));
        assertEquals(8, p.rows(3));
        assertEquals(0, p.rows(0));
        assertArrayEquals(filled(128, (byte) 3), partition(p, 2));
        assertArrayEquals(filled(128, (byte) 4), partition(p, 3));
        assertFalse(s.onDevice(1, 10), "the output itself stays spilled");
      }
      assertEquals(before, s.deviceInUse(), "the span is freed with its pin");
      assertEquals(0, s.pinnedBytes());
      try (DeviceMapOutputStore.Pinned p = s.pin(1, 11, 0, 0, 0)) {
        assertEquals(128, p.bytes(3), "an output in device memory is pinned whole");
      }
      assertEquals("device map output 1/10: partitions 1..4, expected within 0..3",
          assertThrows(IllegalArgumentException.class, () -> s.pin(1, 10, 1, 4, 0)).getMessage());
      assertEquals(4, s.partitions(1, 10));
    }
    assertEquals(0, space.live());
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
