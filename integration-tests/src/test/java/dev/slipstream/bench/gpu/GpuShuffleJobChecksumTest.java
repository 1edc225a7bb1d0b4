package dev.slipstream.bench.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.slipstream.gpu.shuffle.BatchLayout;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * The GPU job's comparison, on the CPU: the packed device layout and the host records of the same
 * generated rows give the same multiset checksum, in any row order; a changed byte changes it; a
 * key in the wrong partition is reported.
 */
class GpuShuffleJobChecksumTest {
  @Test
  void packedBatchAndHostRecordsOfTheSameRowsHaveTheSameChecksum() {
    int rows = 1000;
    long[] keys = new long[rows];
    byte[] payload = new byte[rows * LineitemGen.PAYLOAD_BYTES];
    LineitemGen.generate(7, 3, rows, keys, payload);
    byte[] packed = JobRows.pack(keys, payload, rows);
    BatchLayout l = BatchLayout.packed(rows, LineitemGen.WIDTHS);
    var device = JobRows.checksum(packed, l, 0, 1);
    List<Tuple2<Long, byte[]>> records = new ArrayList<>();
    for (int i = 0; i < rows; i++) {
      records.add(new Tuple2<>(keys[i], java.util.Arrays.copyOfRange(payload, i * 36, i * 36 + 36)));
    }
    Collections.shuffle(records, new java.util.Random(1));
    assertEquals(device, JobRows.hostChecksum(records.iterator(), 0));
    records.get(5)._2()[35] ^= 1;
    assertNotEquals(device, JobRows.hostChecksum(records.iterator(), 0));
    var e = assertThrows(IllegalStateException.class, () -> JobRows.checksum(packed, l, 1, 2));
    assertEquals(true, e.getMessage().startsWith("key "), e.getMessage());
  }
}
