package dev.slipstream.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

/**
 * The push kernel's arguments as one image for device memory, laid out from a base address: the
 * {@code slip_push_launch} struct that {@code slip_push_packed_kernel} takes as its one parameter,
 * optionally a caller's prefix at {@link #PREFIX_AT}, then the queue configurations
 * ({@code slip_push_queue_cfg[]}), the items queue after queue ({@code slip_push_item[]}) and each
 * queue's first item index ({@code uint32_t[queues + 1]}), each part 16-byte aligned. The structs
 * are those of {@code native/include/slipstream/kernels.h}; {@code AbiLayoutTest} checks the offsets
 * below against the JNI library's {@code offsetof}.
 *
 * <p>Threading: immutable once made. Ownership: keeps the caller's prefix array, unchanged by the
 * caller until {@link #image} (no copy on the launch path).
 */
final class PushArguments {
  static final int QUEUE_CFG_BYTES = 24;
  static final int CFG_SRC_REGION = 0;
  static final int CFG_DST_REGION = 4;
  static final int CFG_SIG_REGION = 8;
  static final int CFG_SIG_OFFSET = 16;
  static final int ITEM_BYTES = 24;
  static final int ITEM_SRC_OFFSET = 0;
  static final int ITEM_DST_OFFSET = 8;
  static final int ITEM_LENGTH = 16;
  /** {@code slip_push_launch}: slip_push_packed_kernel's one argument (kernels.h). */
  static final int LAUNCH_BYTES = 48;
  static final int LAUNCH_QUEUES = 0;
  static final int LAUNCH_CFGS = 8;
  static final int LAUNCH_ITEMS = 16;
  static final int LAUNCH_ITEM_START = 24;
  static final int LAUNCH_STATUS = 32;
  static final int LAUNCH_BATCH = 40;
  /** Where a caller's prefix lies in the image, after the launch struct. */
  static final int PREFIX_AT = 64;

  private final byte[] prefix;
  private final byte[] cfg;
  private final byte[] items;
  private final int[] starts;
  private final int cfgAt;
  private final int itemsAt;
  private final int startsAt;
  private final int bytes;

  private PushArguments(List<PushKernel.Queue> queues, List<List<PushKernel.Item>> items, byte[] prefix) {
    this.prefix = prefix;
    this.cfg = encodeQueues(queues);
    this.items = encodeItems(items);
    int n = queues.size();
    this.starts = new int[n + 1];
    int total = 0;
    for (int q = 0; q < n; q++) {
      starts[q] = total;
      total += items.get(q).size();
    }
    starts[n] = total;
    this.cfgAt = prefix == null ? align16(LAUNCH_BYTES) : align16(PREFIX_AT + prefix.length);
    this.itemsAt = cfgAt + align16(cfg.length);
    this.startsAt = itemsAt + align16(this.items.length);
    this.bytes = startsAt + 4 * (n + 1);
  }

  /** The arguments for queue q to send {@code items.get(q)} under {@code queues.get(q)}, with no prefix. */
  static PushArguments of(List<PushKernel.Queue> queues, List<List<PushKernel.Item>> items) {
    return new PushArguments(queues, items, null);
  }

  /** As {@link #of(List, List)}, with {@code prefix} at {@link #PREFIX_AT} (a push item may read it from there). */
  static PushArguments withPrefix(List<PushKernel.Queue> queues, List<List<PushKernel.Item>> items, byte[] prefix) {
    return new PushArguments(queues, items, prefix);
  }

  /** Bytes of the image. */
  int bytes() {
    return bytes;
  }

  /**
   * The image for device address {@code base}: the launch struct points at the set's device queues
   * {@code queueSet}, at the parts after it (from {@code base}), at the statuses {@code status}
   * (4 bytes per queue) and sends {@code batch} items per signal add.
   */
  byte[] image(long queueSet, long base, long status, int batch) {
    ByteBuffer a = ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
    a.putLong(LAUNCH_QUEUES, queueSet).putLong(LAUNCH_CFGS, base + cfgAt)
        .putLong(LAUNCH_ITEMS, base + itemsAt).putLong(LAUNCH_ITEM_START, base + startsAt)
        .putLong(LAUNCH_STATUS, status).putInt(LAUNCH_BATCH, batch);
    if (prefix != null) {
      a.put(PREFIX_AT, prefix);
    }
    a.put(cfgAt, cfg).put(itemsAt, items);
    for (int q = 0; q < starts.length; q++) {
      a.putInt(startsAt + 4 * q, starts[q]);
    }
    return a.array();
  }

  /** Bytes an image with a prefix of {@code prefixBytes}, {@code queues} queues and {@code items} items needs. */
  static long areaBytes(int prefixBytes, int queues, int items) {
    return align16(PREFIX_AT + prefixBytes) + align16(queues * QUEUE_CFG_BYTES)
        + align16(Math.max(1, items) * ITEM_BYTES) + 4 * (queues + 1);
  }

  /** Encodes queue configurations as {@code slip_push_queue_cfg[]}. */
  static byte[] encodeQueues(List<PushKernel.Queue> queues) {
    ByteBuffer b = ByteBuffer.allocate(queues.size() * QUEUE_CFG_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < queues.size(); i++) {
      PushKernel.Queue q = queues.get(i);
      int at = i * QUEUE_CFG_BYTES;
      b.putInt(at + CFG_SRC_REGION, q.srcRegion());
      b.putInt(at + CFG_DST_REGION, q.dstRegion());
      b.putInt(at + CFG_SIG_REGION, q.sigRegion());
      b.putLong(at + CFG_SIG_OFFSET, q.sigOffset());
    }
    return b.array();
  }

  /** Encodes items, queue after queue, as {@code slip_push_item[]} (one zero item when there are none). */
  static byte[] encodeItems(List<List<PushKernel.Item>> perQueue) {
    int n = perQueue.stream().mapToInt(List::size).sum();
    ByteBuffer b = ByteBuffer.allocate(Math.max(1, n) * ITEM_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    int i = 0;
    for (List<PushKernel.Item> items : perQueue) {
      for (PushKernel.Item it : items) {
        int at = i++ * ITEM_BYTES;
        b.putLong(at + ITEM_SRC_OFFSET, it.srcOffset());
        b.putLong(at + ITEM_DST_OFFSET, it.dstOffset());
        b.putLong(at + ITEM_LENGTH, it.length());
      }
    }
    return b.array();
  }

  static int align16(int n) {
    return (n + 15) & ~15;
  }
}
