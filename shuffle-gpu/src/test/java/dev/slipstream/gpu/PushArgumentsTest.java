package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The push kernel's argument image, as the kernel reads it from device memory: the launch struct
 * points at the queue configurations, the items and each queue's first item inside the image, each
 * part 16-byte aligned after the struct or the caller's prefix; an area sized by
 * {@link PushArguments#areaBytes} holds it. Runs everywhere: no device memory is touched.
 */
class PushArgumentsTest {
  private static final long BASE = 0x7f00_0000_1000L;
  private static final List<PushKernel.Queue> QUEUES = List.of(new PushKernel.Queue(0, 2, 2, 4088),
      new PushKernel.Queue(1, 2, 2, 4088));
  private static final List<List<PushKernel.Item>> ITEMS = List.of(
      List.of(new PushKernel.Item(0, 0, 1), new PushKernel.Item(100, 4096, 4097)),
      List.of(new PushKernel.Item(200_000, 1 << 20, 3)));

  private static ByteBuffer le(byte[] b) {
    return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
  }

  @Test
  void theLaunchStructPointsAtTheQueuesItemsAndFirstItemsInsideTheImage() {
    PushArguments a = PushArguments.of(QUEUES, ITEMS);
    ByteBuffer b = le(a.image(0xabcdL, BASE, 0x5000L, 7));
    long cfgs = b.getLong(PushArguments.LAUNCH_CFGS) - BASE;
    long items = b.getLong(PushArguments.LAUNCH_ITEMS) - BASE;
    long starts = b.getLong(PushArguments.LAUNCH_ITEM_START) - BASE;
    assertEquals(0xabcdL, b.getLong(PushArguments.LAUNCH_QUEUES));
    assertEquals(0x5000L, b.getLong(PushArguments.LAUNCH_STATUS));
    assertEquals(7, b.getInt(PushArguments.LAUNCH_BATCH));
    assertEquals(48, cfgs, "right after the launch struct, 16-byte aligned");
    assertEquals(48 + 48, items, "after two 24-byte queue configurations");
    assertEquals(96 + 80, starts, "after three 24-byte items, aligned up to 16");
    assertEquals(176 + 12, a.bytes(), "first item of each queue, and the total");
    assertEquals(b.capacity(), a.bytes());
    int q1 = (int) cfgs + PushArguments.QUEUE_CFG_BYTES;
    assertEquals(1, b.getInt(q1 + PushArguments.CFG_SRC_REGION));
    assertEquals(2, b.getInt(q1 + PushArguments.CFG_DST_REGION));
    assertEquals(4088, b.getLong(q1 + PushArguments.CFG_SIG_OFFSET));
    int i2 = (int) items + 2 * PushArguments.ITEM_BYTES;
    assertEquals(200_000, b.getLong(i2 + PushArguments.ITEM_SRC_OFFSET));
    assertEquals(1 << 20, b.getLong(i2 + PushArguments.ITEM_DST_OFFSET));
    assertEquals(3, b.getLong(i2 + PushArguments.ITEM_LENGTH));
    assertEquals(0, b.getInt((int) starts));
    assertEquals(2, b.getInt((int) starts + 4));
    assertEquals(3, b.getInt((int) starts + 8));
  }

  @Test
  void aPrefixLiesAtItsOffsetAndTheAreaSizeCoversTheImage() {
    byte[] prefix = new byte[40];
    for (int i = 0; i < prefix.length; i++) {
      prefix[i] = (byte) (i + 1);
    }
    PushArguments a = PushArguments.withPrefix(QUEUES, ITEMS, prefix);
    byte[] image = a.image(1, BASE, 2, 1);
    byte[] got = new byte[prefix.length];
    le(image).get(PushArguments.PREFIX_AT, got);
    assertArrayEquals(prefix, got);
    assertEquals(PushArguments.align16(PushArguments.PREFIX_AT + prefix.length),
        le(image).getLong(PushArguments.LAUNCH_CFGS) - BASE);
    assertEquals(a.bytes(), PushArguments.areaBytes(prefix.length, QUEUES.size(), 3));
    assertEquals(PushLauncher.PREFIX_AT, PushArguments.PREFIX_AT);
  }

  @Test
  void noItemsStillEncodeOneEmptyItem() {
    assertEquals(PushArguments.ITEM_BYTES, PushArguments.encodeItems(List.of(List.of())).length);
    assertEquals(PushArguments.areaBytes(0, 1, 0), PushArguments.areaBytes(0, 1, 1));
  }
}
