package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.NodeIdentity;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.gpu.RegionExport;
import java.util.List;

/** Write requests into a device landing region, as the GPU tests make them. */
final class DeviceRequests {
  private DeviceRequests() {}

  /** A single-partition block of map {@code mapId} into {@code [landingOffset, landingOffset + capacity)}. */
  static ShuffleMessages.Entry entry(long mapId, int partition, long landingOffset, long capacity) {
    return new ShuffleMessages.Entry(mapId, partition, 0, capacity, landingOffset);
  }

  /** A request into {@code landing} for no named reader, with a day's budget, answered when served. */
  static WriteRequest request(long id, int shuffleId, RegionExport landing, long tableOffset, long signalOffset,
      int[] widths, List<ShuffleMessages.Entry> entries) {
    return new WriteRequest(id, shuffleId, DeviceLanding.NO_READER, DeviceLanding.MAX_BUDGET_MILLIS,
        landing.descriptor(), tableOffset, signalOffset, entries, widths, WriteRequest.ANSWER_SERVED);
  }

  /** {@code req} from executor {@code executorId} of no application. */
  static WriteRequest from(WriteRequest req, String executorId, long budgetMillis) {
    return req.from(new NodeIdentity("", executorId), budgetMillis);
  }
}
