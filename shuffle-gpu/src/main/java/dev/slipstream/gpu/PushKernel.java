package dev.slipstream.gpu;

import java.io.IOException;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Properties;
import jcuda.Pointer;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;
import jcuda.driver.CUresult;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;

/**
 * The project's push and receive kernels ({@code cuda/src/push.cu}), launched through JCuda from
 * the fatbin that the build compiles with nvcc and ships in the jar (sm_90 SASS plus compute_90
 * PTX; no NVRTC). Arguments use the {@code slip_push_launch}, {@code slip_push_queue_cfg} and
 * {@code slip_push_item} layouts of {@code cuda/include/slipstream/kernels.h}; {@code AbiLayoutTest}
 * checks the offsets below against the JNI library's {@code offsetof}.
 *
 * <p>Threading: {@link #push} and {@link #waitSignals} serialise on the module's own stream;
 * {@link #launcher()}s have streams of their own and run concurrently. Ownership: close the
 * launchers, then the module, before its {@link GpuContext}.
 */
public final class PushKernel implements AutoCloseable {
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
  /** Where {@link Launcher#start(QueueSet, List, List, int, int, byte[], long, long)} puts its prefix in the area. */
  public static final int PREFIX_AT = 64;

  /** What queue q sends: source and destination as table indices, the signal word's place. */
  public record Queue(int srcRegion, int dstRegion, int sigRegion, long sigOffset) {}

  /** One block: {@code length} bytes from the source region to the destination region. */
  public record Item(long srcOffset, long dstOffset, long length) {}

  private final GpuContext ctx;
  private final CUmodule module = new CUmodule();
  private final CUfunction push = new CUfunction();
  private final CUfunction waitSignals = new CUfunction();
  private boolean open;
  private Launcher own;

  private PushKernel(GpuContext ctx) {
    this.ctx = ctx;
  }

  /** Loads the shipped fatbin into {@code ctx}'s device. */
  public static PushKernel load(GpuContext ctx) {
    Properties names = kernelNames();
    byte[] fatbin = NativeLibrary.resource(NativeLibrary.FATBIN);
    PushKernel k = new PushKernel(ctx);
    ctx.makeCurrent();
    CudaDriver.check(JCudaDriver.cuModuleLoadData(k.module, fatbin), "cuModuleLoadData(" + NativeLibrary.FATBIN + ")");
    k.open = true;
    try {
      k.function(names, "slip_push_packed_kernel", k.push);
      k.function(names, "wait_signals_kernel", k.waitSignals);
      k.own = k.new Launcher();
      return k;
    } catch (RuntimeException e) {
      k.close();
      throw e;
    }
  }

  /** The kernel name table shipped beside the fatbin (plain name to mangled name). */
  static Properties kernelNames() {
    Properties p = new Properties();
    try {
      p.load(new StringReader(new String(NativeLibrary.resource(NativeLibrary.KERNEL_NAMES), StandardCharsets.UTF_8)));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return p;
  }

  private void function(Properties names, String name, CUfunction f) {
    String mangled = names.getProperty(name);
    if (mangled == null) {
      throw new IllegalStateException("kernel " + name + " is not in " + NativeLibrary.KERNEL_NAMES + " (has "
          + names.stringPropertyNames() + ")");
    }
    CudaDriver.check(JCudaDriver.cuModuleGetFunction(f, module, mangled), "cuModuleGetFunction(" + name + ")");
  }

  /** Encodes queue configurations as {@code slip_push_queue_cfg[]}. */
  static byte[] encodeQueues(List<Queue> queues) {
    ByteBuffer b = ByteBuffer.allocate(queues.size() * QUEUE_CFG_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < queues.size(); i++) {
      Queue q = queues.get(i);
      int at = i * QUEUE_CFG_BYTES;
      b.putInt(at + CFG_SRC_REGION, q.srcRegion());
      b.putInt(at + CFG_DST_REGION, q.dstRegion());
      b.putInt(at + CFG_SIG_REGION, q.sigRegion());
      b.putLong(at + CFG_SIG_OFFSET, q.sigOffset());
    }
    return b.array();
  }

  /** Encodes items, queue after queue, as {@code slip_push_item[]}. */
  static byte[] encodeItems(List<List<Item>> perQueue) {
    int n = perQueue.stream().mapToInt(List::size).sum();
    ByteBuffer b = ByteBuffer.allocate(Math.max(1, n) * ITEM_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    int i = 0;
    for (List<Item> items : perQueue) {
      for (Item it : items) {
        int at = i++ * ITEM_BYTES;
        b.putLong(at + ITEM_SRC_OFFSET, it.srcOffset());
        b.putLong(at + ITEM_DST_OFFSET, it.dstOffset());
        b.putLong(at + ITEM_LENGTH, it.length());
      }
    }
    return b.array();
  }

  /**
   * Runs the push kernel on this module's own stream: CUDA block q owns queue q and sends
   * {@code items.get(q)}, {@code batch} items at a time, with one signal add of (items, bytes) per
   * batch. Waits (polling, as the native contract asks) up to {@code timeoutMs}; returns each
   * queue's status ({@code SLIP_OK} or its first error; {@link QueueSet#check} gives the text).
   * The queue set's size must equal the number of queues given; {@link Launcher#push} also takes
   * fewer.
   */
  public SlipStatus[] push(QueueSet qs, List<Queue> queues, List<List<Item>> items, int batch, int threads,
      long timeoutMs) {
    if (queues.size() != qs.size()) {
      throw new IllegalArgumentException("push over " + qs.size() + " queues got " + queues.size()
          + " queue configs, expected " + qs.size());
    }
    synchronized (own) {
      return own.push(qs, queues, items, batch, threads, timeoutMs);
    }
  }

  /**
   * A stream of its own with argument buffers kept between launches: pushes on different launchers
   * run concurrently, and a launch allocates nothing once its buffer is large enough (a
   * {@code cuMemFree} per launch would also wait for every other stream). What a push needs from the
   * host ({@link #write}s, the arguments) is staged in pinned host memory of the launcher's own and
   * copied with asynchronous copies on its stream (a copy from pageable memory is staged by the
   * driver and returns only after it). The kernel is {@code slip_push_packed_kernel}: its arguments are a
   * {@code slip_push_launch} at the start of the argument buffer, copied with the rest, so a launch
   * passes one parameter, the same one every time (JCuda's marshalling of six parameters cost more
   * than the driver's launch). The kernel writes each queue's status straight into the launcher's
   * pinned memory (mapped into the device's address space): no copy after the kernel.
   *
   * <p>Threading: one push at a time (callers serialise, and hand it between threads with a
   * happens-before edge). Ownership: close it before the module.
   */
  public final class Launcher implements AutoCloseable {
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

    private Launcher() {
      ensureOpen();
      stream = new GpuStream(ctx);
      open = true;
    }

    /**
     * As {@link PushKernel#push}, over the first {@code queues.size()} queues of {@code qs} (at
     * most its size): {@link #start}, a poll of this launcher's stream until the kernel ended or
     * the timeout, then {@link #statuses}.
     */
    public SlipStatus[] push(QueueSet qs, List<Queue> queues, List<List<Item>> items, int batch, int threads,
        long timeoutMs) {
      start(qs, queues, items, batch, threads);
      await(this::finished, timeoutMs, "push_kernel");
      return statuses();
    }

    /**
     * Launches the push kernel without waiting for it: the statuses preset to "not written" in
     * pinned memory, one stream-ordered copy of the arguments (the launch struct, queue
     * configurations, items, each queue's first item) into the launcher's buffer, then the launch.
     * {@link #finished} tells when it ended, {@link #statuses} what each queue reported. The
     * launcher takes no other push until this one has finished.
     */
    public void start(QueueSet qs, List<Queue> queues, List<List<Item>> items, int batch, int threads) {
      check(qs, queues, items, batch, threads);
      byte[] cfg = encodeQueues(queues);
      byte[] its = encodeItems(items);
      int cfgAt = align16(LAUNCH_BYTES);
      int argBytes = argBytes(cfgAt, cfg.length, its.length, queues.size());
      if (args == null || args.length() < argBytes) {
        if (args != null) {
          args.close();
          args = null;
          argsParams = null;
        }
        args = ctx.allocate(Math.max(4096, Integer.highestOneBit(argBytes - 1) * 2L));
        argsParams = params(args.address());
      }
      launch(qs, queues, items, batch, threads, null, cfgAt, cfg, its, args.address(), argsParams);
    }

    /**
     * As {@link #start(QueueSet, List, List, int, int)}, with the arguments laid out in the caller's
     * device memory {@code [area, area + areaBytes)} (its own, unused by any kernel still running)
     * instead of the launcher's buffer, after {@code prefix} at {@code area + }{@value #PREFIX_AT}:
     * the prefix and the arguments travel in one copy, and a push item may read the prefix from
     * there (a lane puts its block table there, in its table region). Throws
     * {@link IllegalArgumentException} when the area is smaller than {@link #areaBytes} says.
     */
    public void start(QueueSet qs, List<Queue> queues, List<List<Item>> items, int batch, int threads, byte[] prefix,
        long area, long areaBytes) {
      check(qs, queues, items, batch, threads);
      byte[] cfg = encodeQueues(queues);
      byte[] its = encodeItems(items);
      int cfgAt = align16(PREFIX_AT + prefix.length);
      int argBytes = argBytes(cfgAt, cfg.length, its.length, queues.size());
      if (area == 0 || (area & 15) != 0 || areaBytes < argBytes) {
        throw new IllegalArgumentException("push arguments: an area of " + areaBytes + " bytes at 0x"
            + Long.toHexString(area) + ", expected a non-null 16-byte aligned area of at least " + argBytes + " bytes");
      }
      if (areaParams == null || areaParamsAt != area) {
        areaParams = params(area);
        areaParamsAt = area;
      }
      launch(qs, queues, items, batch, threads, prefix, cfgAt, cfg, its, area, areaParams);
    }

    /**
     * Bytes an area needs for {@link #start(QueueSet, List, List, int, int, byte[], long, long)}: the
     * launch struct, a prefix of {@code prefixBytes}, {@code queues} queue configurations and
     * {@code items} items.
     */
    public static long areaBytes(int prefixBytes, int queues, int items) {
      return argBytes(align16(PREFIX_AT + prefixBytes), queues * QUEUE_CFG_BYTES, Math.max(1, items) * ITEM_BYTES,
          queues);
    }

    private static int argBytes(int cfgAt, int cfgBytes, int itemBytes, int queues) {
      return cfgAt + align16(cfgBytes) + align16(itemBytes) + 4 * (queues + 1);
    }

    private static Pointer params(long launchStruct) {
      ByteBuffer param = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
      param.putLong(0, launchStruct);
      return Pointer.to(Pointer.to(param));
    }

    private void check(QueueSet qs, List<Queue> queues, List<List<Item>> items, int batch, int threads) {
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
    private void launch(QueueSet qs, List<Queue> queues, List<List<Item>> items, int batch, int threads, byte[] prefix,
        int cfgAt, byte[] cfg, byte[] its, long base, Pointer params) {
      int n = queues.size();
      int itemsAt = cfgAt + align16(cfg.length);
      int startsAt = itemsAt + align16(its.length);
      int argBytes = startsAt + 4 * (n + 1);
      // Room for the arguments and the statuses before either is placed: growing the staging later
      // would move the statuses the launch struct points at.
      ensureRoom(align16(argBytes) + align16(4 * n));
      long statusAt = reserve(4L * n);
      for (int q = 0; q < n; q++) {
        pinnedView.putInt((int) statusAt + 4 * q, NOT_WRITTEN); // before the launch: the kernel overwrites them
      }
      ByteBuffer a = ByteBuffer.allocate(argBytes).order(ByteOrder.LITTLE_ENDIAN);
      a.putLong(LAUNCH_QUEUES, qs.devicePointer()).putLong(LAUNCH_CFGS, base + cfgAt)
          .putLong(LAUNCH_ITEMS, base + itemsAt).putLong(LAUNCH_ITEM_START, base + startsAt)
          .putLong(LAUNCH_STATUS, pinnedDevice + statusAt).putInt(LAUNCH_BATCH, batch);
      if (prefix != null) {
        a.put(PREFIX_AT, prefix);
      }
      a.put(cfgAt, cfg).put(itemsAt, its);
      int total = 0;
      for (int q = 0; q < n; q++) {
        a.putInt(startsAt + 4 * q, total);
        total += items.get(q).size();
      }
      a.putInt(startsAt + 4 * n, total);
      // Stream-ordered, from pinned staging: the kernel runs on a non-blocking stream that would not
      // wait for a copy on another.
      stage(base, a.array());
      launched = launchOn(stream.handle(), push, n, threads, params, "slip_push_packed_kernel");
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
      if (!idle(stream.handle(), "push_kernel")) {
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

    /** Each queue's status of the push that {@link #finished} (copied back after its kernel, on its stream). */
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

  /** A new launcher (stream and argument buffer) over this module. */
  public Launcher launcher() {
    return new Launcher();
  }

  /** The statuses' preset: no {@code slip_status} has this value. */
  private static final int NOT_WRITTEN = -1;
  /** How often {@link Launcher#finished} asks the driver while the statuses have not come. */
  static final long QUERY_EVERY_NANOS = 100_000;
  private static final java.lang.invoke.VarHandle INT_LE =
      java.lang.invoke.MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

  private static int align16(int n) {
    return (n + 15) & ~15;
  }

  /**
   * Runs the receive-side wait kernel: one thread per signal word at {@code signals + 8 * i} waits
   * until it reaches {@code expected[i]} or {@code timeoutNs} passes; returns each result
   * ({@code SLIP_OK} or {@code SLIP_ERR_TIMEOUT}).
   */
  public SlipStatus[] waitSignals(long signals, long[] expected, long timeoutNs, long timeoutMs) {
    int n = expected.length;
    if (n == 0) {
      return new SlipStatus[0];
    }
    ByteBuffer e = ByteBuffer.allocate(8 * n).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < n; i++) {
      e.putLong(8 * i, expected[i]);
    }
    try (DeviceBuffer dExpected = ctx.allocate(8L * n); DeviceBuffer dResult = ctx.allocate(4L * n)) {
      dExpected.write(0, e.array());
      dResult.fill((byte) 0xff);
      Pointer args = Pointer.to(
          Pointer.to(new long[] {signals}), Pointer.to(new long[] {dExpected.address()}), Pointer.to(new int[] {n}),
          Pointer.to(new long[] {timeoutNs}), Pointer.to(new long[] {dResult.address()}));
      synchronized (own) {
        CUstream st = own.stream.handle();
        launchOn(st, waitSignals, (n + 127) / 128, 128, args, "wait_signals_kernel");
        await(() -> idle(st, "wait_signals_kernel"), timeoutMs, "wait_signals_kernel");
      }
      return statuses(dResult.read(0, 4 * n));
    }
  }

  /** Launches {@code f} on {@code stream}; returns {@link System#nanoTime()} right after the launch call. */
  private long launchOn(CUstream stream, CUfunction f, int blocks, int threads, Pointer args, String name) {
    ensureOpen();
    ctx.makeCurrent();
    CudaDriver.check(JCudaDriver.cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, stream, args, null),
        "cuLaunchKernel(" + name + ", " + blocks + " x " + threads + ")");
    return System.nanoTime();
  }

  /** Whether {@code stream} has no work left (one {@code cuStreamQuery}); throws on its CUDA error. */
  private static boolean idle(CUstream stream, String name) {
    int r = JCudaDriver.cuStreamQuery(stream);
    if (r == CUresult.CUDA_ERROR_NOT_READY) {
      return false;
    }
    CudaDriver.check(r, name + " (cuStreamQuery)");
    return true;
  }

  /**
   * Polls until {@code ended} is true, or throws SLIP_ERR_TIMEOUT after {@code timeoutMs}. Polls rather
   * than blocks: a proxy push waits on the native executor thread, which a blocked synchronous CUDA
   * call in another thread was seen to hold off (native/README.md).
   */
  private static void await(java.util.function.BooleanSupplier ended, long timeoutMs, String name) {
    long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
    while (!ended.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        throw new GpuException(SlipStatus.SLIP_ERR_TIMEOUT, name + " still running after " + timeoutMs + " ms");
      }
      Thread.onSpinWait();
    }
  }

  private static SlipStatus[] statuses(byte[] raw) {
    ByteBuffer b = ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN);
    SlipStatus[] s = new SlipStatus[raw.length / 4];
    for (int i = 0; i < s.length; i++) {
      int code = b.getInt(4 * i);
      if (code < 0 || code >= SlipStatus.values().length) {
        throw new GpuException(SlipStatus.SLIP_ERR_STATE, "kernel left status " + code + " for entry " + i
            + " (0xffffffff: not written), expected a slip_status");
      }
      s[i] = SlipStatus.of(code);
    }
    return s;
  }

  private void ensureOpen() {
    if (!open) {
      throw new IllegalStateException("push kernel module is closed");
    }
  }

  @Override
  public void close() {
    if (open) {
      open = false;
      if (own != null) {
        own.close();
      }
      ctx.makeCurrent();
      JCudaDriver.cuModuleUnload(module);
    }
  }
}
