package dev.slipstream.gpu;

import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.JCudaDriver;

/**
 * One GPU for this process: the native library's {@code slip_ctx} and JCuda's handle on the same
 * primary context. Regions, queue sets and device buffers are made from it.
 *
 * <p>Threading: any thread may use it; every call that goes through JCuda first makes the
 * primary context current on the calling thread. Ownership: close it after everything made from
 * it (queue sets, then regions and buffers); {@link #close()} is idempotent.
 */
public final class GpuContext implements AutoCloseable {
  private final int device;
  private final CUdevice cuDevice = new CUdevice();
  private final CUcontext primary = new CUcontext();
  private long handle;
  private boolean retained;

  private GpuContext(int device) {
    this.device = device;
  }

  /** Opens device {@code device}; throws with the probe's reason when there is no GPU. */
  public static GpuContext open(int device) {
    CudaDriver.init();
    GpuContext c = new GpuContext(device);
    try {
      c.handle = SlipNative.createContext(device);
      CudaDriver.check(JCudaDriver.cuDeviceGet(c.cuDevice, device), "cuDeviceGet(" + device + ")");
      CudaDriver.check(JCudaDriver.cuDevicePrimaryCtxRetain(c.primary, c.cuDevice), "cuDevicePrimaryCtxRetain");
      c.retained = true;
      c.makeCurrent();
      return c;
    } catch (RuntimeException e) {
      c.close();
      throw e;
    }
  }

  public int device() {
    return device;
  }

  /** The device's PCI bus id as the driver reports it ({@code 0000:1b:00.0}). */
  public String pciBusId() {
    ensureOpen();
    String[] out = new String[1];
    CudaDriver.check(JCudaDriver.cuDeviceGetPCIBusId(out, 64, cuDevice), "cuDeviceGetPCIBusId(device " + device + ")");
    return out[0].trim();
  }

  /** The device's UUID in nvidia-smi's form ({@code GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}). */
  public String uuid() {
    ensureOpen();
    jcuda.driver.CUuuid u = new jcuda.driver.CUuuid();
    CudaDriver.check(JCudaDriver.cuDeviceGetUuid(u, cuDevice), "cuDeviceGetUuid(device " + device + ")");
    StringBuilder sb = new StringBuilder("GPU-");
    for (int i = 0; i < 16; i++) {
      if (i == 4 || i == 6 || i == 8 || i == 10) {
        sb.append('-');
      }
      sb.append(String.format("%02x", u.bytes[i] & 0xff));
    }
    return sb.toString();
  }

  /** Makes this device's primary context current on the calling thread (for JCuda calls). */
  public void makeCurrent() {
    ensureOpen();
    CudaDriver.check(JCudaDriver.cuCtxSetCurrent(primary), "cuCtxSetCurrent(device " + device + ")");
  }

  /** Allocates {@code bytes} of device memory (cuMemAlloc). */
  public DeviceBuffer allocate(long bytes) {
    makeCurrent();
    return DeviceBuffer.allocate(this, bytes);
  }

  /** Copies {@code len} bytes from device address {@code src} of this device into {@code dst[off..]}. */
  public void copyToHost(long src, byte[] dst, int off, int len) {
    if (len > 0 && src == 0) {
      throw new IllegalArgumentException("device copy of " + len + " bytes from address 0");
    }
    makeCurrent();
    CudaDriver.copyFromDevice(src, dst, off, len);
  }

  long handle() {
    ensureOpen();
    return handle;
  }

  private void ensureOpen() {
    if (handle == 0) {
      throw new IllegalStateException("GPU context of device " + device + " is closed");
    }
  }

  @Override
  public void close() {
    if (retained) {
      retained = false;
      JCudaDriver.cuDevicePrimaryCtxRelease(cuDevice);
    }
    if (handle != 0) {
      SlipNative.destroyContext(handle);
      handle = 0;
    }
  }
}
