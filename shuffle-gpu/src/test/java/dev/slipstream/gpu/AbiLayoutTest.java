package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Java codecs against the C structs: offsets and sizes exported by the JNI library
 * ({@code offsetof}/{@code sizeof} of slipstream/abi.h and kernels.h, STYLE.md) must equal the constants
 * the Java side encodes with. Runs everywhere: the library loads without a GPU.
 */
class AbiLayoutTest {
  /** "type" to ("field" to {offset, size}); field "-" holds the struct's size. */
  private static final Map<String, Map<String, int[]>> NATIVE = new LinkedHashMap<>();

  @BeforeAll
  static void readNativeLayout() {
    GpuTestSupport.assumeNativeBuilt();
    NativeLibrary.load();
    for (String line : SlipNative.layout().split("\n")) {
      String[] f = line.split(" ");
      assertEquals(4, f.length, "layout line \"" + line + "\"");
      NATIVE.computeIfAbsent(f[0], k -> new LinkedHashMap<>())
          .put(f[1], new int[] {Integer.parseInt(f[2]), Integer.parseInt(f[3])});
    }
  }

  private static int[] field(String type, String field) {
    Map<String, int[]> t = NATIVE.get(type);
    assertNotNull(t, "native layout has no struct " + type + " (has " + NATIVE.keySet() + ")");
    int[] f = t.get(field);
    assertNotNull(f, type + " has no field " + field + " (has " + t.keySet() + ")");
    return f;
  }

  @Test
  void regionDescriptorCodecMatchesSlipRegionDesc() {
    assertEquals(RegionExport.BYTES, field("slip_region_desc", "-")[1]);
    assertEquals(192, RegionExport.BYTES);
    Map<String, int[]> expected = new LinkedHashMap<>(NATIVE.get("slip_region_desc"));
    expected.remove("-");
    Map<String, int[]> java = RegionExport.layout();
    assertEquals(expected.keySet(), java.keySet(), "the same fields, in declaration order");
    for (Map.Entry<String, int[]> e : java.entrySet()) {
      int[] c = expected.get(e.getKey());
      assertEquals(c[0], e.getValue()[0], "offset of slip_region_desc." + e.getKey());
      assertEquals(c[1], e.getValue()[1], "size of slip_region_desc." + e.getKey());
    }
  }

  @Test
  void pushArgumentEncodingMatchesKernelsH() {
    assertEquals(PushArguments.QUEUE_CFG_BYTES, field("slip_push_queue_cfg", "-")[1]);
    assertEquals(PushArguments.CFG_SRC_REGION, field("slip_push_queue_cfg", "src_region")[0]);
    assertEquals(PushArguments.CFG_DST_REGION, field("slip_push_queue_cfg", "dst_region")[0]);
    assertEquals(PushArguments.CFG_SIG_REGION, field("slip_push_queue_cfg", "sig_region")[0]);
    assertEquals(PushArguments.CFG_SIG_OFFSET, field("slip_push_queue_cfg", "sig_offset")[0]);
    assertEquals(8, field("slip_push_queue_cfg", "sig_offset")[1]);
    assertEquals(PushArguments.ITEM_BYTES, field("slip_push_item", "-")[1]);
    assertEquals(PushArguments.ITEM_SRC_OFFSET, field("slip_push_item", "src_offset")[0]);
    assertEquals(PushArguments.ITEM_DST_OFFSET, field("slip_push_item", "dst_offset")[0]);
    assertEquals(PushArguments.ITEM_LENGTH, field("slip_push_item", "length")[0]);
    assertEquals(PushArguments.LAUNCH_BYTES, field("slip_push_launch", "-")[1]);
    assertEquals(PushArguments.LAUNCH_QUEUES, field("slip_push_launch", "queues")[0]);
    assertEquals(PushArguments.LAUNCH_CFGS, field("slip_push_launch", "cfgs")[0]);
    assertEquals(PushArguments.LAUNCH_ITEMS, field("slip_push_launch", "items")[0]);
    assertEquals(PushArguments.LAUNCH_ITEM_START, field("slip_push_launch", "item_start")[0]);
    assertEquals(PushArguments.LAUNCH_STATUS, field("slip_push_launch", "status")[0]);
    assertEquals(PushArguments.LAUNCH_BATCH, field("slip_push_launch", "batch")[0]);
    assertEquals(4, field("slip_push_launch", "batch")[1]);
  }

  @Test
  void serveRingCodecMatchesServeH() {
    assertEquals(dev.slipstream.gpu.serve.ServeRing.HEADER_BYTES, field("slip_serve_ring_header", "-")[1]);
    assertEquals(dev.slipstream.gpu.serve.ServeRing.SLOT_BYTES, field("slip_serve_request", "-")[1]);
    assertEquals(dev.slipstream.gpu.serve.ServeRing.ANSWER_BYTES, field("slip_serve_done", "-")[1]);
    Map<String, Integer> header = Map.of("magic", 0, "version", 4, "nslots", 8, "slot_bytes", 12, "reader_pid", 16,
        "holder_pid", 24);
    Map<String, Integer> request = Map.of("seq", 0, "request_id", 8, "magic", 16, "nblocks", 20, "shuffle_id", 24,
        "flags", 28, "landing_key", 32, "table_offset", 40, "deadline_ns", 48, "blocks", 64);
    Map<String, Integer> block = Map.of("map_id", 0, "partition", 8, "dst_offset", 16, "capacity", 24);
    Map<String, Integer> done = Map.of("seq", 0, "status", 8, "block", 12, "bytes", 16, "value", 24, "taken_ns", 32,
        "copy_ns", 40, "copied_ns", 48, "answered_ns", 56);
    header.forEach((f, at) -> assertEquals(at, field("slip_serve_ring_header", f)[0], "slip_serve_ring_header." + f));
    request.forEach((f, at) -> assertEquals(at, field("slip_serve_request", f)[0], "slip_serve_request." + f));
    block.forEach((f, at) -> assertEquals(at, field("slip_serve_block", f)[0], "slip_serve_block." + f));
    done.forEach((f, at) -> assertEquals(at, field("slip_serve_done", f)[0], "slip_serve_done." + f));
    assertEquals(32, field("slip_serve_block", "-")[1]);
    assertEquals(56, field("slip_serve_request", "signal_offset")[0], "slip_serve_request.signal_offset");
  }

  @Test
  void otherSharedStructsHaveTheirDocumentedSizes() {
    assertEquals(128, field("slip_proxy_desc", "-")[1], "proxy descriptor: two 64-byte halves");
    assertEquals(128, field("slip_proxy_ctrl", "-")[1], "head and tail on separate 64-byte lines");
    assertEquals(64, field("slip_proxy_ctrl", "tail")[0]);
    assertEquals(48, field("slip_dev_error", "-")[1]);
    assertEquals(32, field("slip_dev_region", "-")[1]);
    assertEquals(QueueSet.DEV_REGION_BYTES, field("slip_dev_region", "-")[1]);
  }
}
