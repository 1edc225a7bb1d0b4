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
 * The project's push and receive kernels ({@code native/src/push.cu}), launched through JCuda from
 * the fatbin that the build compiles with nvcc and ships in the jar (sm_90 SASS plus compute_90
 * PTX; no NVRTC). This class loads the module and its functions and runs the kernels to their end;
 * {@link PushLauncher} launches pushes without waiting, with the arguments that
 * {@link PushArguments} packs in the layouts of {@code native/include/slipstream/kernels.h}.
 *
 * <p>Threading: {@link #push} and {@link #waitSignals} serialise on the module's own launcher and
 * its stream; {@link #launcher()}s have streams of their own and run concurrently. Ownership: owns
 * the module and its own launcher; close the other launchers, then the module, before its
 * {@link GpuContext}.
 */
public final class PushKernel implements AutoCloseable {
  /** What queue q sends: source and destination as table indices, the signal word's place. */
  public record Queue(int srcRegion, int dstRegion, int sigRegion, long sigOffset) {}

  /** One block: {@code length} bytes from the source region to the destination region. */
  public record Item(long srcOffset, long dstOffset, long length) {}

  private final GpuContext ctx;
  private final CUmodule module = new CUmodule();
  private final CUfunction push = new CUfunction();
  private final CUfunction waitSignals = new CUfunction();
  private boolean open;
  private PushLauncher own;

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
      k.own = k.launcher();
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

  /**
   * Runs the push kernel on this module's own stream: CUDA block q owns queue q and sends
   * {@code items.get(q)}, {@code batch} items at a time, with one signal add of (items, bytes) per
   * batch. Waits (polling, as the native contract asks) up to {@code timeoutMs}; returns each
   * queue's status ({@code SLIP_OK} or its first error; {@link QueueSet#check} gives the text).
   * The queue set's size must equal the number of queues given; {@link PushLauncher#push} also
   * takes fewer.
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

  /** A new launcher (stream and argument buffer) over this module. */
  public PushLauncher launcher() {
    return new PushLauncher(this, ctx);
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
        CUstream st = own.stream();
        launchOn(st, waitSignals, (n + 127) / 128, 128, args, "wait_signals_kernel");
        await(() -> idle(st, "wait_signals_kernel"), timeoutMs, "wait_signals_kernel");
      }
      return statuses(dResult.read(0, 4 * n));
    }
  }

  /** Launches the push kernel on {@code stream} with {@code params} (a {@link PushLauncher}'s); returns as below. */
  long launchPush(CUstream stream, int queues, int threads, Pointer params) {
    return launchOn(stream, push, queues, threads, params, "slip_push_packed_kernel");
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
  static boolean idle(CUstream stream, String name) {
    int r = JCudaDriver.cuStreamQuery(stream);
    if (r == CUresult.CUDA_ERROR_NOT_READY) {
      return false;
    }
    CudaDriver.check(r, name + " (cuStreamQuery)");
    return true;
  }

  /**
   * Polls until {@code ended} is true, or throws SLIP_ERR_TIMEOUT after {@code timeoutMs}. Polls rather
   * than blocks: a push over proxy queues ({@link Backend#PROXY}) waits on the native executor
   * thread, which a blocked synchronous CUDA call in another thread was seen to hold off
   * (native/README.md).
   */
  static void await(java.util.function.BooleanSupplier ended, long timeoutMs, String name) {
    long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
    while (!ended.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        throw new GpuException(SlipStatus.SLIP_ERR_TIMEOUT, name + " still running after " + timeoutMs + " ms");
      }
      Thread.onSpinWait();
    }
  }

  /** Decodes the {@code slip_status} words a kernel left, 4 bytes each. */
  static SlipStatus[] statuses(byte[] raw) {
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

  void ensureOpen() {
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
