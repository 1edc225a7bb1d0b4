package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * Control messages of the pull-driven write protocol, sent two-sided on a transport queue.
 * Each starts with the wire header (magic, version, type id).
 */
public final class ShuffleMessages {
  public static final byte TYPE_WRITE_REQUEST = 16;
  public static final byte TYPE_WRITE_FAILURE = 17;
  public static final byte TYPE_DEVICE_WRITE = 18;
  public static final byte TYPE_DEVICE_WRITE_RESULT = 19;
  /** Largest device write request carried (its own codec checks the contents). */
  public static final int MAX_DEVICE_REQUEST = 4 << 20;
  public static final int MAX_ENTRIES = 1 << 16;
  public static final int MAX_REASON = 8 * 1024;
  /** Encoded bytes of one write request entry. */
  private static final int ENCODED_ENTRY = 40;
  /**
   * Bytes per record of the block table the holder writes, one record per partition of each
   * entry: the partition's bytes from the entry's block offset on, the partition's checksum.
   */
  public static final int TABLE_ENTRY = 16;
  /** Most block-table records (partitions over all entries) one write request may ask for. */
  public static final int MAX_TABLE_RECORDS = 1 << 16;

  private ShuffleMessages() {}

  /** Common supertype of decoded messages. */
  public sealed interface Message permits WriteRequest, WriteFailure, DeviceWrite, DeviceWriteResult {}

  /**
   * One piece of a block to write into the landing region: the bytes of partitions
   * {@code [partition, endPartition)} of map output {@code mapId}, taken as one run (they are
   * adjacent in the map output), from {@code blockOffset} into that run on, at most
   * {@code capacity} of them, placed at {@code landingOffset}. One partition is a single block, more
   * a batch block. (Map statuses carry approximate sizes, so the reader reserves capacity and the
   * holder reports how many bytes the block really has.)
   */
  public record Entry(long mapId, int partition, int endPartition, long blockOffset, long capacity,
                      long landingOffset) {
    /** A piece of the single block of {@code partition}. */
    public Entry(long mapId, int partition, long blockOffset, long capacity, long landingOffset) {
      this(mapId, partition, partition + 1, blockOffset, capacity, landingOffset);
    }

    /** Partitions covered, which is the number of block-table records this entry gets. */
    public int partitions() {
      return endPartition - partition;
    }
  }

  /**
   * The reader asks the holder to write {@code entries} of shuffle {@code shuffleId} into the
   * request's own landing registration {@code landing} (offsets are relative to it); then to
   * write, at {@code lengthsOffset}, a 16-byte record per partition of each entry, in order: the
   * bytes that partition has from the entry's {@code blockOffset} on (0 for a partition wholly
   * before it; over the entry's partitions these add up to the bytes the block has from there, of
   * which the holder wrote at most the capacity) and the checksum of that partition's whole block,
   * both 8-byte little-endian (see {@link #TABLE_ENTRY}); then to add the number of entries to the
   * signal at {@code signalOffset}, after all of it. A batch entry's checksums are per partition
   * so that the reader verifies each partition's bytes against the checksum its map task computed.
   *
   * <p>{@code reader} names the application and executor asking: the holder serves only its own
   * application and writes only to the endpoint its peer table holds for that executor.
   * {@code budgetMillis} is the time the reader will still wait when it sends the request (a
   * duration, not a clock reading, so the two hosts' clocks need not agree): the holder drops the
   * request once that much time has passed since it arrived.
   */
  public record WriteRequest(long requestId, int shuffleId, NodeIdentity reader, long budgetMillis,
                             RegionDescriptor landing, long lengthsOffset, long signalOffset, List<Entry> entries)
      implements Message {
    public WriteRequest {
      entries = List.copyOf(entries);
    }

    /** Block-table records the holder writes: one per partition of each entry. */
    public int tableRecords() {
      int n = 0;
      for (Entry e : entries) {
        n += e.partitions();
      }
      return n;
    }

    public long totalCapacity() {
      long t = 0;
      for (Entry e : entries) {
        t += e.capacity();
      }
      return t;
    }

    public ByteBuffer encode() {
      WireWriter w = new WireWriter(80 + 3 * (reader.applicationId().length() + reader.executorId().length())
          + RegionDescriptor.ENCODED_LENGTH + entries.size() * ENCODED_ENTRY);
      w.putHeader(TYPE_WRITE_REQUEST).putLong(requestId).putInt(shuffleId)
          .putString(reader.applicationId()).putString(reader.executorId()).putLong(budgetMillis);
      landing.encode(w);
      w.putLong(lengthsOffset).putLong(signalOffset).putInt(entries.size());
      for (Entry e : entries) {
        w.putLong(e.mapId()).putInt(e.partition()).putInt(e.endPartition()).putLong(e.blockOffset())
            .putLong(e.capacity()).putLong(e.landingOffset());
      }
      return w.toByteBuffer();
    }
  }

  /** The holder could not serve a request; nothing more will be written for it. */
  public record WriteFailure(long requestId, TransportError error, String reason) implements Message {
    public ByteBuffer encode() {
      String r = reason.length() > MAX_REASON / 4 ? reason.substring(0, MAX_REASON / 4) : reason;
      WireWriter w = new WireWriter(32 + r.length() * 3);
      w.putHeader(TYPE_WRITE_FAILURE).putLong(requestId).putInt(error.code()).putString(r);
      return w.toByteBuffer();
    }
  }

  /**
   * A GPU shuffle's device write request (encoded by its own codec, opaque here), sent
   * executor to executor; {@code id} matches the answer.
   */
  public record DeviceWrite(long id, byte[] request) implements Message {
    public DeviceWrite {
      request = request.clone();
    }

    @Override
    public byte[] request() {
      return request.clone();
    }

    public ByteBuffer encode() {
      WireWriter w = new WireWriter(32 + request.length);
      w.putHeader(TYPE_DEVICE_WRITE).putLong(id).putBytes(request);
      return w.toByteBuffer();
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof DeviceWrite d && d.id == id && java.util.Arrays.equals(d.request, request);
    }

    @Override
    public int hashCode() {
      return Long.hashCode(id) * 31 + java.util.Arrays.hashCode(request);
    }
  }

  /** The holder's answer to {@link DeviceWrite} {@code id}: pushed ({@code bytes}), or refused with the reason. */
  public record DeviceWriteResult(long id, boolean ok, long bytes, String reason, ServeTimeline timeline)
      implements Message {
    public DeviceWriteResult(long id, boolean ok, long bytes, String reason) {
      this(id, ok, bytes, reason, ServeTimeline.NONE);
    }

    public ByteBuffer encode() {
      String r = reason.length() > MAX_REASON / 4 ? reason.substring(0, MAX_REASON / 4) : reason;
      WireWriter w = new WireWriter(96 + r.length() * 3);
      w.putHeader(TYPE_DEVICE_WRITE_RESULT).putLong(id).putByte((byte) (ok ? 1 : 0)).putLong(bytes).putString(r);
      timeline.write(w);
      return w.toByteBuffer();
    }
  }

  /** Decodes a message; every field is checked before use. */
  public static Message decode(ByteBuffer buf) throws TransportException {
    WireReader r = new WireReader(buf);
    byte type = r.readHeader("shuffle message");
    switch (type) {
      case TYPE_WRITE_REQUEST -> {
        long id = r.getLong("request id");
        int shuffleId = r.getInt("shuffle id");
        String app = r.getString("application id", 4 * NodeIdentity.MAX_ID);
        String executor = r.getString("reader executor id", 4 * NodeIdentity.MAX_ID);
        if (app.length() > NodeIdentity.MAX_ID || executor.length() > NodeIdentity.MAX_ID) {
          throw new TransportException(TransportError.MALFORMED, "write request " + id + ": application id of "
              + app.length() + " and executor id of " + executor.length() + " characters, expected at most "
              + NodeIdentity.MAX_ID + " each");
        }
        long budget = r.getLong("time budget");
        if (budget < 0) {
          throw new TransportException(TransportError.MALFORMED, "write request " + id + ": time budget " + budget
              + " ms, expected >= 0");
        }
        RegionDescriptor landing = RegionDescriptor.decode(r);
        long lengthsOffset = r.getLong("lengths offset");
        long signalOffset = r.getLong("signal offset");
        int n = r.getInt("entry count", 1, MAX_ENTRIES);
        if (r.remaining() < (long) n * ENCODED_ENTRY) {
          throw new TransportException(TransportError.MALFORMED, "truncated write request: " + n + " entries need "
              + (n * (long) ENCODED_ENTRY) + " bytes, have " + r.remaining());
        }
        Entry[] entries = new Entry[n];
        long records = 0;
        for (int i = 0; i < n; i++) {
          long mapId = r.getLong("map id");
          int partition = r.getInt("partition");
          int endPartition = r.getInt("end partition");
          long blockOffset = r.getLong("block offset");
          long capacity = r.getLong("capacity");
          long landingOffset = r.getLong("landing offset");
          if (partition < 0 || endPartition <= partition || blockOffset < 0 || capacity <= 0 || landingOffset < 0) {
            throw new TransportException(TransportError.MALFORMED, "write request entry " + i + ": partitions ["
                + partition + ", " + endPartition + "), block offset " + blockOffset + ", capacity " + capacity
                + ", landing offset " + landingOffset + "; expected 0 <= partition < end partition, offsets >= 0"
                + " and capacity > 0");
          }
          records += (long) endPartition - partition;
          if (records > MAX_TABLE_RECORDS) {
            throw new TransportException(TransportError.MALFORMED, "write request " + id + ": entries up to " + i
                + " cover " + records + " partitions, expected at most " + MAX_TABLE_RECORDS + " in one request");
          }
          entries[i] = new Entry(mapId, partition, endPartition, blockOffset, capacity, landingOffset);
        }
        r.expectEnd("write request");
        return new WriteRequest(id, shuffleId, new NodeIdentity(app, executor), budget, landing, lengthsOffset,
            signalOffset, List.of(entries));
      }
      case TYPE_WRITE_FAILURE -> {
        long id = r.getLong("request id");
        TransportError e = TransportError.fromCode(r.getInt("error code"));
        String reason = r.getString("failure reason", MAX_REASON);
        r.expectEnd("write failure");
        return new WriteFailure(id, e, reason);
      }
      case TYPE_DEVICE_WRITE -> {
        long id = r.getLong("device write id");
        byte[] req = r.getBytes("device write request", MAX_DEVICE_REQUEST);
        r.expectEnd("device write");
        return new DeviceWrite(id, req);
      }
      case TYPE_DEVICE_WRITE_RESULT -> {
        long id = r.getLong("device write id");
        byte ok = r.getByte("device write outcome");
        if (ok != 0 && ok != 1) {
          throw new TransportException(TransportError.MALFORMED, "device write result: outcome byte " + ok
              + ", expected 0 (refused) or 1 (pushed)");
        }
        long bytes = r.getLong("pushed bytes");
        if (bytes < 0) {
          throw new TransportException(TransportError.MALFORMED, "device write result: " + bytes
              + " bytes pushed, expected >= 0");
        }
        String reason = r.getString("refusal reason", MAX_REASON);
        ServeTimeline timeline = ServeTimeline.read(r);
        r.expectEnd("device write result");
        return new DeviceWriteResult(id, ok == 1, bytes, reason, timeline);
      }
      default -> throw new TransportException(TransportError.UNKNOWN_TYPE,
          "shuffle message: got type id " + type + ", expected " + TYPE_WRITE_REQUEST + " (write request), "
              + TYPE_WRITE_FAILURE + " (write failure), " + TYPE_DEVICE_WRITE + " (device write) or "
              + TYPE_DEVICE_WRITE_RESULT + " (device write result)");
    }
  }
}
