package dev.slipstream.spark.gpu;

/**
 * The columnar engine's side of a device-table shuffle ({@link DeviceTableDependency}): what a map
 * record's value is on the device, and what a reducer makes of a table that landed.
 *
 * <p>Threading: called on task threads, several tasks at once. Ownership: the writer closes every
 * {@link DeviceTable} it was given once its bytes are in the map-output store (also when the task
 * fails); a {@link LandedTable}'s memory belongs to Slipstream and stays valid until the reduce
 * task completes, so {@link #assemble} copies what the value keeps beyond that.
 */
public interface DeviceTableCodec extends java.io.Serializable {
  /** The device table that a map record's value holds (the writer takes ownership of it). */
  DeviceTable table(Object value);

  /**
   * A reduce record's value made from {@code tables} (one or more, in the order they were read: a
   * reduce task's tables come in groups of at most {@link #groupBytes} bytes and
   * {@link #MAX_GROUP_ROWS} rows, a larger table alone), so the engine gets few large values where
   * map tasks wrote many small tables. Their bytes are complete on the device (no copy into them is
   * pending); the engine orders its own work on them after that.
   */
  Object assemble(java.util.List<LandedTable> tables);

  /** The most bytes of tables once assembled ({@link #assembledBytes}) one reduce value is made from (the engine's batch size). */
  long groupBytes();

  /**
   * The bytes {@code table} takes once assembled: its landed bytes, unless the engine stored it in
   * a form that grows on the way back (compressed), which its metadata describes. Validates that
   * description; a table it refuses fails the read.
   */
  default long assembledBytes(LandedTable table) {
    return table.bytes();
  }

  /** The most rows one reduce value is made from: a cudf column's row count is a 32-bit int. */
  long MAX_GROUP_ROWS = Integer.MAX_VALUE;

  /**
   * One table in device memory of this executor's GPU: {@link #bytes()} bytes at {@link #address()}
   * (ready: no work on it is pending) and the host metadata the engine needs to read them back.
   */
  interface DeviceTable extends AutoCloseable {
    long rows();

    long address();

    long bytes();

    /** The engine's host-side description of the bytes, if its format needs one (may be empty). */
    byte[] metadata();

    @Override
    void close();
  }

  /** A table as it landed on the reducer: its metadata, and its bytes at a device address. */
  record LandedTable(long rows, byte[] metadata, long address, long bytes) {}
}
