package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.gpu.GpuRegion;
import dev.slipstream.gpu.PushKernel;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One device write request being served by a {@link PushScheduler}: checked and pinned, waiting
 * for or holding a lane, until its outcome is reported. Threading: handed between the server's
 * threads with a happens-before edge (its lock or its queues). Ownership: holds its map outputs'
 * pins until {@link #unpin}.
 */
final class PushJob {
  final WriteRequest req;
  final Map<Long, DeviceMapOutputStore.Pinned> pins;
  final byte[] table;
  final long total;
  final long timeoutMs;
  final long deadline;
  final long[] marks;
  final PushScheduler.Served done;
  final List<GpuRegion> outputs = new ArrayList<>();
  final List<List<PushKernel.Item>> items = new ArrayList<>();
  PushLane lane;
  boolean holdsPermit;

  PushJob(WriteRequest req, Map<Long, DeviceMapOutputStore.Pinned> pins, byte[] table, long total,
      long deadline, long timeoutMs, long[] marks, PushScheduler.Served done) {
    this.req = req;
    this.pins = pins;
    this.table = table;
    this.total = total;
    this.timeoutMs = timeoutMs;
    this.deadline = deadline;
    this.marks = marks;
    this.done = done;
  }

  void unpin() {
    pins.values().forEach(DeviceMapOutputStore.Pinned::close);
    pins.clear();
  }
}
