package dev.slipstream.gpu;

import jcuda.driver.CUdeviceptr;

/** A JCuda device pointer whose raw address can be read (JCuda keeps it protected). */
final class DevicePointer extends CUdeviceptr {
  long address() {
    return getNativePointer() + getByteOffset();
  }
}
