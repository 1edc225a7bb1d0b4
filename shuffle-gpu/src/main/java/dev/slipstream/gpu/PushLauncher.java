package dev.slipstream.gpu;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import jcuda.Pointer;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;

/**
 * Launches {@link PushKernel}'s push kernel on a stream of its own, with argument buffers kept
 * between launches: pushes on different launchers run concurrently, and a launch allocates nothing
 * once its buffer is large enough (a {@code cuMemFree} per launch would also wait for every other
 * stream). What a push needs from the host ({@link #write}s, the arguments) is staged in pinned host
 * memory of the launcher's own and copied with asynchronous copies on its stream (a copy from
 * pageable memory is staged by the driver and returns only after it). The kernel is
 * {@code slip_push_packed_kernel}: its arguments are a {@code slip_push_launch} at the start of the
 * argument buffer, copied with the rest ({@link PushArguments}), so a launch passes one parameter,
 * the same one every time (JCuda's marshalling of six parameters cost more than the driver's
 * launch). The kernel writes each queue's status straight into the launcher's pinned memory (mapped
 * into the device's address space): no copy after the kernel.
 *
 * <p>Threading: one push at a time (callers serialise, and hand it between threads with a
 * happens-before edge). Ownership: owns its stream, argument buffer and pinned staging; close it
 * before the module ({@link PushKernel#launcher()}).
 */
public final class PushLauncher implements AutoCloseable {
  /** Where {@link #start(QueueSet, List, List, int, int, byte[], long, long)} puts its prefix in the area. */
  public static final int PREFIX_AT = PushArguments.PREFIX_AT;
  /** The statuses' preset: no {@code slip_status} has this value. */
  private static final int NOT_WRITTEN = -1;
  /** How often {@link #finished} asks the driver while the statuses have not come. */
  static final long QUERY_EVERY_NANOS = 100_000;
  private static final VarHandle INT_LE = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

  private final PushKernel kernel;
  private final GpuContext ctx;
  private final GpuStream stream;
  private DeviceBuffer args;
  /** Pinned host staging: the current push's writes and arguments from offset 0, then its statuses. */
  private Pointer pinned;
  /** {@link #pinned}'s device address (mapped pinned memory): where the kernel writes the statuses. */
  private long pinnedDevice;
  private long pinnedBytes;
  /** The kernel's parameter list: a pointer to the launch struct at the start of {@link #args}. */
  private Pointer argsParams;
  /** The same for a caller's area (see the second start), and the area's address it was built for. */
  private Pointer areaParams;
  private long areaParamsAt;
  /** Bytes of {@link #pinned} staged since the last launch (their copies may still be in flight until it ends). */
  private long staged;
  private long statusHost;
  /** {@link #pinned} as a buffer, for reading the statuses. */
  private ByteBuffer pinnedView;
  /** When {@link #finished} last asked the driver. */
  private long queried;
  private boolean open;
  private long launched;
  private long ended;
  private boolean running;
  private int queuesLaunched;

  PushLauncher(PushKernel kernel, GpuContext ctx) {
    this.kernel = kernel;
    this.ctx = ctx;
    kernel.ensureOpen();
    stream = new GpuStream(ctx);
    open = true;
  }

  /** This launcher's stream (the module's own launcher lends it to the wait kernel). */
  CUstream stream() {
    return stream.handle();
  }

  /**
   * As {@link PushKernel#push}, over the first {@code queues.size()} queues of {@code qs} (at
   * most its size): {@link #start}, a poll of this launcher's stream until the kernel ended or
   * the timeout, then {@link #statuses}.
   */
  public SlipStatus[] push(QueueSet qs, List<PushKernel.Queue> queues, List<List<PushKernel.Item>> items, int batch,
      int threads, long timeoutMs) {
    start(qs, queues, items, batch, threads);
    PushKernel.await(this::finished, timeoutMs, "push_kernel");
    return statuses();
  }

  /**
   * Launches the push kernel without waiting for it: the statuses preset to "not written" in
   * pinned memory, one stream-ordered copy of the arguments (the launch struct, queue
   * configurations, items, each queue's first item) into the launcher's buffer, then the launch.
   * {@link #finished} tells when it ended, {@link #statuses} what each queue reported. The
   * launcher takes no other push until this one has finished.
   */
  public void start(QueueSet qs, List<PushKernel.Queue> queues, List<List<PushKernel.Item>> items, int batch,
      int threads) {
    check(qs, queues, items, batch, threads);
    PushArguments a = PushArguments.of(queues, items);
    int argBytes = a.bytes();
    if (args == null || args.length() < argBytes) {
      if (args != null) {
        args.close();
        args = null;
        argsParams = null;
      }
      args = ctx.allocate(Math.max(4096, Integer.highestOneBit(argBytes - 1) * 2L));
      argsParams = params(args.address());
    }
    launch(qs, queues.size(), a, batch, threads, args.address(), argsParams);
  }

  /**
   * As {@link #start(QueueSet, List, List, int, int)}, with the arguments laid out in the caller's
   * device memory {@code [area, area + areaBytes)} (its own, unused by any kernel still running)
   * instead of the launcher's buffer, after {@code prefix} at {@code area + }{@value #PREFIX_AT}:
   * the prefix and the arguments travel in one copy, and a push item may read the prefix from
   * there (a lane puts its block table there, in its table region). Throws
   * {@link IllegalArgumentException} when the area is smaller than {@link #areaBytes} says.
   * {@code prefix} is read at the call only.
   */
  public void start(QueueSet qs, List<PushKernel.Queue> queues, List<List<PushKernel.Item>> items, int batch,
      int threads, byte[] prefix, long area, long areaBytes) {
    check(qs, queues, items, batch, threads);
    PushArguments a = PushArguments.withPrefix(queues, items, prefix);
    int argBytes = a.bytes();
    if (area == 0 || (area & 15) != 0 || areaBytes < argBytes) {
      throw new IllegalArgumentException("push arguments: an area of " + areaBytes + " bytes at 0x"
          + Long.toHexString(area) + ", expected a non-null 16-byte aligned area of at least " + argBytes + " bytes");
    }
    if (areaParams == null || areaParamsAt != area) {
      areaParams = params(area);
      areaParamsAt = area;
    }
    launch(qs, queues.size(), a, batch, threads, area, areaParams);
  }

  /**
   * Bytes an area needs for {@link #start(QueueSet, List, List, int, int, byte[], long, long)}: the
   * launch struct, a prefix of {@code prefixBytes}, {@code queues} queue configurations and
   * {@code items} items.
   */
  public static long areaBytes(int prefixBytes, int queues, int items) {
    return PushArguments.areaBytes(prefixBytes, queues, items);
  }

  private static Pointer params(long launchStruct) {
    ByteBuffer param = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
    param.putLong(0, launchStruct);
    return Pointer.to(Pointer.to(param));
  }

  private void check(QueueSet qs, List<PushKernel.Queue> queues, List<List<PushKernel.Item>> items, int batch,
      int threads) {
    int n = queues.size();
    if (n == 0 || n > qs.size() || items.size() != n) {
      throw new IllegalArgumentException("push over a set of " + qs.size() + " queues got " + n
          + " queue configs and " + items.size() + " item lists, expected as many of each, 1 to " + qs.size());
    }
    if (batch <= 0 || threads < 32 || threads > 1024 || threads % 32 != 0) {
      throw new IllegalArgumentException("push: batch " + batch + ", " + threads + " threads; expected batch > 0"
          + " and a multiple of 32 in 32..1024 threads");
    }
    if (!open) {
      throw new IllegalStateException("push launcher is closed");
    }
    if (running) {
      throw new IllegalStateException("push launcher: the last push has not finished");
    }
  }

  /** Stages the arguments (and the prefix, if any) at {@code base} in one copy, presets the statuses, launches. */
  private void launch(QueueSet qs, int n, PushArguments a, int batch, int threads, long base, Pointer params) {
    // Room for the arguments and the statuses before either is placed: growing the staging later
    // would move the statuses the launch struct points at.
    ensureRoom(PushArguments.align16(a.bytes()) + PushArguments.align16(4 * n));
    long statusAt = reserve(4L * n);
    for (int q = 0; q < n; q++) {
      pinnedView.putInt((int) statusAt + 4 * q, NOT_WRITTEN); // before the launch: the kernel overwrites them
    }
    // Stream-ordered, from pinned staging: the kernel runs on a non-blocking stream that would not
    // wait for a copy on another.
    stage(base, a.image(qs.devicePointer(), base, pinnedDevice + statusAt, batch));
    launched = kernel.launchPush(stream.handle(), n, threads, params);
    statusHost = statusAt;
    queried = launched;
    staged = 0; // the next push stages only after this one ended, when these copies are done
    ended = 0;
    queuesLaunched = n;
    running = true;
  }

  /**
   * Whether the push {@link #start}ed last has ended (the first true sets {@link #endedNanos});
   * throws on a CUDA error of the stream. Reads the statuses in pinned memory, which each queue's
   * CUDA block writes as its last act: no driver call until they are all there but one
   * {@code cuStreamQuery} every {@value #QUERY_EVERY_NANOS} ns, which reports a failed kernel (its
   * statuses never come). Once they are all there, one {@code cuStreamQuery} confirms the end.
   */
  public boolean finished() {
    if (!running) {
      return true;
    }
    long now = System.nanoTime();
    if (!statusesLanded()) {
      if (now - queried < QUERY_EVERY_NANOS) {
        return false;
      }
      queried = now;
    }
    ctx.makeCurrent();
    if (!PushKernel.idle(stream.handle(), "push_kernel")) {
      return false;
    }
    ended = System.nanoTime();
    running = false;
    return true;
  }

  /**
   * Whether this launcher's stream has no work left (one {@code cuStreamQuery}), whatever became of
   * its last push; throws on a CUDA error of the stream. A launcher set aside after a failed or
   * timed-out push can be closed once this is true.
   */
  public boolean streamIdle() {
    if (!open) {
      return true;
    }
    ctx.makeCurrent();
    return PushKernel.idle(stream.handle(), "push launcher");
  }

  /** Whether every status word of the running push has its copy (none holds the preset "not written" any more). */
  private boolean statusesLanded() {
    ByteBuffer b = pinnedView;
    for (int q = 0; q < queuesLaunched; q++) {
      if ((int) INT_LE.getAcquire(b, (int) statusHost + 4 * q) == NOT_WRITTEN) {
        return false;
      }
    }
    return true;
  }

  /** Each queue's status of the push that {@link #finished} (written by its kernel into pinned memory). */
  public SlipStatus[] statuses() {
    if (running) {
      throw new IllegalStateException("push launcher: statuses asked before the push finished");
    }
    if (queuesLaunched == 0) {
      throw new IllegalStateException("push launcher: statuses asked before any push");
    }
    byte[] raw = new byte[4 * queuesLaunched];
    pinnedView.get((int) statusHost, raw);
    return PushKernel.statuses(raw);
  }

  /** {@link System#nanoTime()} when the last push's launch call returned, and when its end was seen. */
  public long launchedNanos() {
    return launched;
  }

  public long endedNanos() {
    return ended;
  }

  /**
   * Copies {@code src} to device address {@code address}, ordered before this launcher's next push
   * (staged in pinned memory at once: {@code src} may change after the call).
   */
  public void write(long address, byte[] src) {
    if (!open) {
      throw new IllegalStateException("push launcher is closed");
    }
    if (running) {
      throw new IllegalStateException("push launcher: write before the last push finished");
    }
    stage(address, src);
  }

  /** Stages {@code src} in pinned memory and copies it to {@code address} on the stream. */
  private void stage(long address, byte[] src) {
    long at = reserve(src.length);
    pinned.getByteBuffer(at, src.length).put(src);
    CudaDriver.check(JCudaDriver.cuMemcpyHtoDAsync(CudaDriver.at(address), pinned.withByteOffset(at), src.length,
        stream.handle()), "cuMemcpyHtoDAsync(" + src.length + " bytes, pinned)");
  }

  /**
   * Makes room for {@code len} more bytes (16-aligned) of pinned staging for the current push.
   * Growing it first waits for the stream, whose copies may still read the old buffer, and starts
   * the new one empty.
   */
  private void ensureRoom(long len) {
    ctx.makeCurrent();
    long need = staged + ((len + 15) & ~15L);
    if (pinned != null && need <= pinnedBytes) {
      return;
    }
    long want = Math.max(64 << 10, Long.highestOneBit(Math.max(1, need - 1)) * 2);
    if (pinned != null) {
      CudaDriver.check(JCudaDriver.cuStreamSynchronize(stream.handle()), "push staging (cuStreamSynchronize)");
      JCudaDriver.cuMemFreeHost(pinned);
      pinned = null;
      pinnedView = null;
      // Earlier copies of this push were done from the old buffer, and are done now: they keep their data.
    }
    pinned = CudaDriver.allocHostMapped(want, "push staging");
    pinnedDevice = CudaDriver.deviceAddressOf(pinned, "push staging");
    pinnedView = pinned.getByteBuffer(0, want).order(ByteOrder.LITTLE_ENDIAN);
    pinnedBytes = want;
    staged = 0;
  }

  /** Reserves {@code len} bytes (16-aligned) of pinned staging for the current push ({@link #ensureRoom} first). */
  private long reserve(long len) {
    ensureRoom(len);
    long at = staged;
    staged += (len + 15) & ~15L;
    return at;
  }

  @Override
  public void close() {
    if (open) {
      open = false;
      stream.close();
      if (args != null) {
        args.close();
      }
      if (pinned != null) {
        ctx.makeCurrent();
        JCudaDriver.cuMemFreeHost(pinned);
        pinned = null;
        pinnedView = null;
      }
    }
  }
}
