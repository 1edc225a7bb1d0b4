package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.memory.RangeAllocator;
import dev.slipstream.gpu.DeviceBuffer;
import dev.slipstream.gpu.GpuContext;
import dev.slipstream.gpu.GpuException;
import dev.slipstream.gpu.ResidentServer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps a resident server's directory in step with a {@link DeviceMapOutputStore}: every output
 * in device memory is entered (its partition offsets and row counts copied into a device table
 * the kernel reads), and revoked before its memory is freed or spilled. An output the directory
 * cannot take (its table or the server's directory is full) is left out with one log line: the
 * kernel refuses requests for it with {@code SLIP_ERR_BAD_REGION}, as for a spilled output, while
 * the host-driven path ({@link PushWriter}) still serves both, bringing a spilled output back.
 *
 * <p>Threading: called under the store's lock; thread-safe on its own. Ownership: owns the
 * offsets table; {@link #close()} frees it (follow the store with nobody first).
 */
public final class ResidentDirectory implements DeviceResidency, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ResidentDirectory.class);

  private final ResidentServer server;
  private final DeviceBuffer table;
  private final RangeAllocator ranges;
  private final Duration revokeTimeout;
  /** Per output entered: {table offset, table bytes}. */
  private final Map<DeviceMapOutputStore.Key, long[]> entered = new HashMap<>();
  private boolean fullLogged;

  /**
   * A directory for {@code server} whose offsets table holds {@code tableBytes} of partition offsets
   * and counts. Outputs are entered with their region's key on the context and, when the store's
   * space registers on a NIC ({@link GpuOutputSpace} made with a {@link NicRegistrar}), their
   * memory key there, for readers on other machines.
   */
  public ResidentDirectory(GpuContext ctx, ResidentServer server, long tableBytes, Duration revokeTimeout) {
    this.server = server;
    this.table = ctx.allocate(tableBytes);
    this.ranges = new RangeAllocator(tableBytes, 16);
    this.revokeTimeout = revokeTimeout;
  }

  @Override
  public synchronized void arrived(int shuffleId, long mapAttemptId, OutputSpace.Block block, long[] offsets,
      long[] counts) {
    int n = counts.length;
    long bytes = 8L * (2 * n + 1);
    long at = ranges.take(bytes);
    if (at < 0) {
      if (!fullLogged) {
        fullLogged = true;
        LOG.warn("resident server directory: no room for the offsets of shuffle {} map {} ({} bytes; {} of {} in use);"
            + " outputs beyond it are served the host-driven way only", shuffleId, mapAttemptId, bytes, ranges.used(),
            ranges.capacity());
      }
      return;
    }
    ByteBuffer b = ByteBuffer.allocate((int) bytes).order(ByteOrder.LITTLE_ENDIAN);
    for (long v : offsets) {
      b.putLong(v);
    }
    for (long v : counts) {
      b.putLong(v);
    }
    table.write(at, b.array());
    long base = table.address() + at;
    try {
      server.putOutput(shuffleId, mapAttemptId, block.address(), base, base + 8L * (n + 1), n,
          nicSource(block));
    } catch (GpuException e) {
      ranges.give(at, ranges.rounded(bytes));
      if (!fullLogged) {
        fullLogged = true;
        LOG.warn("resident server directory: shuffle {} map {} not entered ({}); such outputs are served the"
            + " host-driven way only", shuffleId, mapAttemptId, e.getMessage());
      }
      return;
    }
    entered.put(new DeviceMapOutputStore.Key(shuffleId, mapAttemptId), new long[] {at, ranges.rounded(bytes)});
  }

  @Override
  public synchronized void leaving(int shuffleId, long mapAttemptId) {
    long[] e = entered.remove(new DeviceMapOutputStore.Key(shuffleId, mapAttemptId));
    if (e == null) {
      return; // never entered
    }
    server.revokeOutput(shuffleId, mapAttemptId, revokeTimeout);
    ranges.give(e[0], e[1]);
  }

  /**
   * Where gpunetio readers' WQEs read a block: its slab's region as registered on the GPU context
   * (the software NIC checks the key against that registration), or null for memory that is not.
   */
  static ResidentServer.NicSource nicSource(OutputSpace.Block block) {
    if (block instanceof GpuOutputSpace.SlabBlock b) {
      return new ResidentServer.NicSource(b.region().id(), (int) b.region().key(), b.base(), b.nicKey());
    }
    return null;
  }

  /** Outputs in the directory now. */
  public synchronized int entries() {
    return entered.size();
  }

  @Override
  public synchronized void close() {
    table.close();
  }
}
