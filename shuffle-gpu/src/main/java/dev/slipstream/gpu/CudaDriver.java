package dev.slipstream.gpu;

import java.nio.ByteBuffer;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

/**
 * The JCuda (driver API) side: initialisation, result checks and copies to raw device addresses.
 * JCuda carries device memory, copies, streams, module loading and kernel launches; the JNI library
 * carries what the native host API owns (contexts, regions and their IPC export/import, queue sets).
 * Both meet in the device's primary context, so pointers from either side are valid in the other.
 *
 * <p>Loaded only after {@link GpuRuntime#probe()} found a GPU: JCuda's driver binding needs
 * libcuda.so.1 to load. JCuda's exceptions stay off (the JCuda default); every result is checked
 * here and turned into a {@link GpuException} naming the call.
 */
final class CudaDriver {
  private CudaDriver() {}

  /** Initialises the driver API once; throws with the probe's reason when there is no GPU. */
  static void init() {
    Init.check();
  }

  static void check(int result, String what) {
    if (result != CUresult.CUDA_SUCCESS) {
      throw new GpuException(SlipStatus.SLIP_ERR_CUDA, what + " failed: " + CUresult.stringFor(result));
    }
  }

  /** A JCuda pointer to a raw device address (a region's, or one the native library returned). */
  static CUdeviceptr at(long address) {
    return new CUdeviceptr().withByteOffset(address);
  }

  // Host staging goes through direct buffers, not Java arrays: JCuda pins arrays with
  // GetPrimitiveArrayCritical, and under -Xcheck:jni (the GPU tests' setting) a device-to-host
  // copy into a pinned array was seen to come back as zeros on the GPU machine.

  static void copyDeviceToDevice(long dst, long src, long len) {
    if (len > 0) {
      check(JCudaDriver.cuMemcpyDtoD(at(dst), at(src), len), "cuMemcpyDtoD(" + len + " bytes)");
    }
  }

  /**
   * Each thread's staging buffer: copies go through it in pieces of at most this size, so a copy
   * allocates nothing (a direct buffer per copy of a whole batch made the JDK call System.gc() to
   * free direct memory: full collections of 25 to 30 ms in the executors, measured in docs/benchmarks/2026-11-30-gpu-shuffle-job.md).
   */
  static final int STAGING_BYTES = 4 << 20;
  private static final ThreadLocal<ByteBuffer> STAGING =
      ThreadLocal.withInitial(() -> ByteBuffer.allocateDirect(STAGING_BYTES));

  static void copyToDevice(long address, byte[] src, int off, int len) {
    checkArray(src, off, len);
    ByteBuffer staging = STAGING.get();
    for (int done = 0; done < len; ) {
      int n = Math.min(STAGING_BYTES, len - done);
      staging.put(0, src, off + done, n);
      check(JCudaDriver.cuMemcpyHtoD(at(address + done), Pointer.to(staging), n), "cuMemcpyHtoD(" + n + " bytes)");
      done += n;
    }
  }

  static void copyFromDevice(long address, byte[] dst, int off, int len) {
    checkArray(dst, off, len);
    ByteBuffer staging = STAGING.get();
    for (int done = 0; done < len; ) {
      int n = Math.min(STAGING_BYTES, len - done);
      check(JCudaDriver.cuMemcpyDtoH(Pointer.to(staging), at(address + done), n), "cuMemcpyDtoH(" + n + " bytes)");
      staging.get(0, dst, off + done, n);
      done += n;
    }
  }

  /**
   * Copies {@code src}'s remaining bytes (a direct buffer) to device address {@code address}, without
   * staging; the buffer's position is left as it is.
   */
  static void copyToDevice(long address, ByteBuffer src) {
    checkDirect(src);
    int n = src.remaining();
    if (n > 0) {
      check(JCudaDriver.cuMemcpyHtoD(at(address), Pointer.to(src.slice()), n), "cuMemcpyHtoD(" + n + " bytes)");
    }
  }

  /** Fills {@code dst}'s remaining bytes (a direct buffer) from device address {@code address}; position unchanged. */
  static void copyFromDevice(long address, ByteBuffer dst) {
    checkDirect(dst);
    int n = dst.remaining();
    if (n > 0) {
      check(JCudaDriver.cuMemcpyDtoH(Pointer.to(dst.slice()), at(address), n), "cuMemcpyDtoH(" + n + " bytes)");
    }
  }

  private static void checkDirect(ByteBuffer b) {
    if (!b.isDirect()) {
      throw new IllegalArgumentException("a device copy from or to a heap buffer of " + b.remaining()
          + " bytes, expected a direct buffer");
    }
  }

  /** Pinned host memory of {@code bytes} (cuMemAllocHost), for {@code what}; free it with cuMemFreeHost. */
  static Pointer allocHost(long bytes, String what) {
    Pointer p = new Pointer();
    check(JCudaDriver.cuMemAllocHost(p, bytes), "cuMemAllocHost(" + bytes + " bytes, " + what + ")");
    return p;
  }

  /** Pinned host memory mapped into the device's address space ({@code cuMemHostAlloc}, DEVICEMAP). */
  static Pointer allocHostMapped(long bytes, String what) {
    Pointer p = new Pointer();
    check(JCudaDriver.cuMemHostAlloc(p, bytes, JCudaDriver.CU_MEMHOSTALLOC_DEVICEMAP),
        "cuMemHostAlloc(" + bytes + " bytes, mapped, " + what + ")");
    return p;
  }

  /** The device address of mapped pinned memory {@code p} ({@code cuMemHostGetDevicePointer}). */
  static long deviceAddressOf(Pointer p, String what) {
    DevicePointer d = new DevicePointer();
    check(JCudaDriver.cuMemHostGetDevicePointer(d, p, 0), "cuMemHostGetDevicePointer(" + what + ")");
    return d.address();
  }

  /**
   * The allocation that contains device address {@code address} in the current context, as
   * {@code {base, size}} ({@code cuMemGetAddressRange}); throws when the address is in none.
   */
  static long[] addressRange(long address) {
    DevicePointer base = new DevicePointer();
    long[] size = new long[1];
    check(JCudaDriver.cuMemGetAddressRange(base, size, at(address)),
        "cuMemGetAddressRange(0x" + Long.toHexString(address) + ")");
    return new long[] {base.address(), size[0]};
  }

  static void fill(long address, byte value, long len) {
    check(JCudaDriver.cuMemsetD8(at(address), value, len), "cuMemsetD8");
  }

  private static void checkArray(byte[] a, int off, int len) {
    if (off < 0 || len < 0 || off > a.length - len) {
      throw new IndexOutOfBoundsException("offset " + off + " + length " + len + " outside a " + a.length + "-byte array");
    }
  }

  /** Checks {@code offset + length} against a device allocation, as the native checks do. */
  static void checkRange(long offset, long length, long capacity, String what) {
    if (offset < 0 || length < 0 || offset > capacity || length > capacity - offset) {
      throw new IndexOutOfBoundsException("offset " + offset + " + length " + length + " outside " + what + " (length "
          + capacity + ")");
    }
  }

  /**
   * Loads JCuda's driver binding with {@code java.io.tmpdir} pointing at a fresh folder of this
   * process. JCuda extracts its library to java.io.tmpdir under a fixed name and loads an existing
   * file as it is, so two JVMs starting together (the executors of one machine) could map a
   * half-written file: SIGBUS in dlopen, seen on the GPU machine with two executors (docs/gpu.md).
   * The property is restored at once; the folder goes when the JVM exits.
   */
  private static void loadJCudaPrivately() {
    synchronized (System.class) {
      String old = System.getProperty("java.io.tmpdir");
      try {
        java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("slipstream-jcuda-");
        dir.toFile().deleteOnExit();
        System.setProperty("java.io.tmpdir", dir.toString());
        Class.forName("jcuda.driver.JCudaDriver", true, CudaDriver.class.getClassLoader());
        java.io.File[] files = dir.toFile().listFiles();
        if (files != null) {
          for (java.io.File f : files) {
            f.deleteOnExit(); // registered after the folder: deleted before it
          }
        }
      } catch (java.io.IOException | ClassNotFoundException e) {
        throw new IllegalStateException("loading JCuda's driver binding: " + e, e);
      } finally {
        System.setProperty("java.io.tmpdir", old);
      }
    }
  }

  private static final class Init {
    private static final RuntimeException FAILURE = tryInit();

    static void check() {
      if (FAILURE != null) {
        throw FAILURE;
      }
    }

    private static RuntimeException tryInit() {
      GpuProbe probe = GpuRuntime.probe();
      if (!probe.available()) {
        return new GpuException(SlipStatus.SLIP_ERR_NO_DEVICE, probe.reason());
      }
      try {
        loadJCudaPrivately();
        int r = JCudaDriver.cuInit(0);
        return r == CUresult.CUDA_SUCCESS ? null
            : new GpuException(SlipStatus.SLIP_ERR_CUDA, "cuInit failed: " + CUresult.stringFor(r));
      } catch (UnsatisfiedLinkError e) {
        return new GpuException(SlipStatus.SLIP_ERR_NO_DEVICE, "JCuda's driver binding did not load: " + e.getMessage(), e);
      }
    }
  }
}
