package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Properties;
import org.junit.jupiter.api.Test;

/** The loader and what the build packaged; runs everywhere (no GPU needed). */
class NativeLibraryTest {

  @Test
  void rejectsPlatformsOtherThanLinuxX8664NamingThePlatform() {
    UnsupportedOperationException mac = assertThrows(UnsupportedOperationException.class,
        () -> NativeLibrary.platformDir("Mac OS X", "aarch64"));
    assertEquals("Slipstream's GPU binding is built for linux-x86_64 only; this JVM runs on Mac OS X/aarch64",
        mac.getMessage());
    UnsupportedOperationException arm = assertThrows(UnsupportedOperationException.class,
        () -> NativeLibrary.platformDir("Linux", "aarch64"));
    assertTrue(arm.getMessage().endsWith("runs on Linux/aarch64"), arm.getMessage());
    assertEquals("linux-x86_64", NativeLibrary.platformDir("Linux", "amd64"));
    assertEquals("linux-x86_64", NativeLibrary.platformDir("linux", "x86_64"));
  }

  @Test
  void loadsThePackagedLibraryWithOrWithoutAGpu() {
    GpuTestSupport.assumeNativeBuilt();
    assertDoesNotThrow(NativeLibrary::load);
    // Loading twice is a no-op, not a second System.load.
    assertDoesNotThrow(NativeLibrary::load);
  }

  @Test
  void packagesTheKernelFatbinAndItsNameTable() {
    GpuTestSupport.assumeNativeBuilt();
    byte[] fatbin = NativeLibrary.resource(NativeLibrary.FATBIN);
    // nvcc's fatbin header starts with the magic 0xBA55ED50 (little-endian).
    assertEquals(0xBA55ED50, ByteBuffer.wrap(fatbin).order(ByteOrder.LITTLE_ENDIAN).getInt(0),
        "fatbin magic of " + NativeLibrary.FATBIN);
    Properties names = PushKernel.kernelNames();
    assertEquals(3, names.size(), names.toString());
    assertTrue(names.getProperty("push_kernel").contains("11push_kernel"), names.toString());
    assertEquals("slip_push_packed_kernel", names.getProperty("slip_push_packed_kernel"), "C linkage: not mangled");
    assertTrue(names.getProperty("wait_signals_kernel").contains("19wait_signals_kernel"), names.toString());
  }

  @Test
  void missingResourceSaysTheJarLacksTheNativePart() {
    GpuTestSupport.assumeNativeBuilt();
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> NativeLibrary.resource("nope.so"));
    assertTrue(e.getMessage().startsWith("resource /dev/slipstream/native/linux-x86_64/nope.so is not in the class"
        + " path"), e.getMessage());
  }
}
