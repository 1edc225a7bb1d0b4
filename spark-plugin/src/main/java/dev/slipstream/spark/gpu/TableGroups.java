package dev.slipstream.spark.gpu;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.function.ToLongFunction;

/**
 * Groups a reduce task's landed tables, in order, into runs of consecutive tables of at most
 * {@code maxBytes} bytes and {@code maxRows} rows together; a table larger than either goes alone.
 * A table's bytes are what {@code size} says it becomes (the engine's {@link
 * DeviceTableCodec#assembledBytes}: more than it landed as when it landed compressed). Reads at most
 * one table ahead of the group it returns.
 *
 * <p>Threading: one task thread. Ownership: holds nothing (the tables' memory is the reader's).
 */
final class TableGroups implements Iterator<List<DeviceTableCodec.LandedTable>> {
  private final Iterator<DeviceTableCodec.LandedTable> tables;
  private final long maxBytes;
  private final long maxRows;
  private final ToLongFunction<DeviceTableCodec.LandedTable> size;
  /** The first table of the next group, read when it did not fit the one before. */
  private DeviceTableCodec.LandedTable carried;

  TableGroups(Iterator<DeviceTableCodec.LandedTable> tables, long maxBytes, long maxRows) {
    this(tables, maxBytes, maxRows, DeviceTableCodec.LandedTable::bytes);
  }

  TableGroups(Iterator<DeviceTableCodec.LandedTable> tables, long maxBytes, long maxRows,
              ToLongFunction<DeviceTableCodec.LandedTable> size) {
    if (maxBytes <= 0 || maxRows <= 0) {
      throw new IllegalArgumentException("table groups of at most " + maxBytes + " bytes and " + maxRows
          + " rows; expected both > 0");
    }
    this.tables = tables;
    this.maxBytes = maxBytes;
    this.maxRows = maxRows;
    this.size = size;
  }

  @Override
  public boolean hasNext() {
    return carried != null || tables.hasNext();
  }

  @Override
  public List<DeviceTableCodec.LandedTable> next() {
    if (!hasNext()) {
      throw new NoSuchElementException("no more device tables");
    }
    List<DeviceTableCodec.LandedTable> group = new ArrayList<>();
    long bytes = 0;
    long rows = 0;
    while (carried != null || tables.hasNext()) {
      DeviceTableCodec.LandedTable t = carried != null ? carried : tables.next();
      carried = null;
      long b = size.applyAsLong(t);
      if (!group.isEmpty() && (bytes + b > maxBytes || rows + t.rows() > maxRows)) {
        carried = t;
        break;
      }
      group.add(t);
      bytes += b;
      rows += t.rows();
    }
    return group;
  }
}
