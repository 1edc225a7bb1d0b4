package dev.slipstream.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import java.util.NoSuchElementException;
import org.junit.jupiter.api.Test;

class TableGroupsTest {
  private static DeviceTableCodec.LandedTable table(long rows, long bytes) {
    return new DeviceTableCodec.LandedTable(rows, new byte[0], 0x1000 * (bytes + 1), bytes);
  }

  /** Each group as "rows/bytes,rows/bytes,...". */
  private static List<String> groups(List<DeviceTableCodec.LandedTable> in, long maxBytes, long maxRows) {
    List<String> out = new ArrayList<>();
    TableGroups g = new TableGroups(in.iterator(), maxBytes, maxRows);
    while (g.hasNext()) {
      StringBuilder sb = new StringBuilder();
      for (DeviceTableCodec.LandedTable t : g.next()) {
        sb.append(sb.isEmpty() ? "" : ",").append(t.rows()).append('/').append(t.bytes());
      }
      out.add(sb.toString());
    }
    assertThrows(NoSuchElementException.class, g::next);
    return out;
  }

  @Test
  void consecutiveTablesFillAGroupUpToItsBytesInOrder() {
    List<DeviceTableCodec.LandedTable> in = List.of(table(1, 100), table(2, 200), table(3, 300), table(4, 400),
        table(5, 50));
    assertEquals(List.of("1/100,2/200,3/300", "4/400,5/50"), groups(in, 600, 1000));
    assertEquals(List.of("1/100,2/200", "3/300", "4/400,5/50"), groups(in, 599, 1000));
    assertEquals(List.of("1/100,2/200,3/300,4/400,5/50"), groups(in, 1050, 1000));
  }

  @Test
  void aTableLargerThanTheGroupGoesAloneAndNothingIsLost() {
    List<DeviceTableCodec.LandedTable> in = List.of(table(1, 10), table(2, 5000), table(3, 10), table(4, 10));
    assertEquals(List.of("1/10", "2/5000", "3/10,4/10"), groups(in, 100, 1000));
  }

  @Test
  void rowsBoundAGroupToo() {
    List<DeviceTableCodec.LandedTable> in = List.of(table(60, 1), table(50, 1), table(10, 1), table(200, 1));
    assertEquals(List.of("60", "50,10", "200").stream().map(s -> s.replaceAll("(\\d+)(,|$)", "$1/1$2")).toList(),
        groups(in, 1 << 20, 100));
  }

  @Test
  void groupsAreBoundedByTheBytesTablesBecomeNotTheBytesTheyLandedAs() {
    // Landed compressed: each table becomes four times its landed bytes once assembled.
    List<DeviceTableCodec.LandedTable> in = List.of(table(1, 100), table(2, 100), table(3, 100), table(4, 100));
    List<String> out = new ArrayList<>();
    TableGroups g = new TableGroups(in.iterator(), 800, 1000, t -> 4 * t.bytes());
    while (g.hasNext()) {
      out.add(g.next().stream().map(t -> Long.toString(t.rows())).reduce((a, b) -> a + "," + b).orElseThrow());
    }
    assertEquals(List.of("1,2", "3,4"), out);
    assertEquals(List.of("1/100,2/100,3/100,4/100"), groups(in, 800, 1000));
  }

  @Test
  void noTablesMakeNoGroupAndBadBoundsAreRefused() {
    TableGroups g = new TableGroups(List.<DeviceTableCodec.LandedTable>of().iterator(), 1, 1);
    assertFalse(g.hasNext());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> new TableGroups(List.<DeviceTableCodec.LandedTable>of().iterator(), 0, 5));
    assertEquals("table groups of at most 0 bytes and 5 rows; expected both > 0", e.getMessage());
  }
}
