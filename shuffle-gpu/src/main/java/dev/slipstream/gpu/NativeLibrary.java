package dev.slipstream.gpu;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Loads {@code libslipstream_jni.so} from the jar: the build puts it, the kernel fatbin and the
 * kernel name table under {@value #RESOURCE_ROOT}{@code <platform>/}. The library is copied into a
 * fresh temporary folder (deleted at exit) and loaded with {@link System#load}; its
 * {@code JNI_OnLoad} binds {@link SlipNative}'s methods.
 *
 * <p>Threading: {@link #load()} may be called from any thread; the library is loaded once per
 * class loader, and a failure is kept and rethrown with its first cause on every later call.
 */
public final class NativeLibrary {
  static final String RESOURCE_ROOT = "/dev/slipstream/native/";
  static final String LIBRARY = "libslipstream_jni.so";
  static final String FATBIN = "slipstream-kernels.fatbin";
  static final String KERNEL_NAMES = "slipstream-kernels.properties";
  /** Always written by the build: built=true, or built=false and the reason (no CUDA toolkit). */
  static final String BUILD_INFO = "build.properties";

  private NativeLibrary() {}

  /** The resource folder for a platform: {@code linux-x86_64}, the only one built. */
  static String platformDir(String osName, String osArch) {
    String os = osName.toLowerCase(Locale.ROOT);
    String arch = osArch.toLowerCase(Locale.ROOT);
    boolean x64 = arch.equals("amd64") || arch.equals("x86_64");
    if (!os.startsWith("linux") || !x64) {
      throw new UnsupportedOperationException("Slipstream's GPU binding is built for linux-x86_64 only; this JVM runs on "
          + osName + "/" + osArch);
    }
    return "linux-x86_64";
  }

  /** Loads the library (once), or throws the reason it cannot be loaded here. */
  public static void load() {
    Holder.check();
  }

  /** Bytes of a packaged resource of this platform (the fatbin, the kernel name table). */
  static byte[] resource(String name) {
    String path = RESOURCE_ROOT + platformDir(System.getProperty("os.name"), System.getProperty("os.arch")) + "/" + name;
    try (InputStream in = NativeLibrary.class.getResourceAsStream(path)) {
      if (in == null) {
        String unbuilt = unbuiltReason();
        throw new IllegalStateException(unbuilt != null ? "this jar was built without the GPU binding: " + unbuilt
            : "resource " + path + " is not in the class path: the jar was built without the native part"
                + " (native/build-jni.sh)");
      }
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException("reading resource " + path, e);
    }
  }

  /** Why the build left the GPU binding out (native/build-jni.sh without the CUDA toolkit), or null. */
  static String unbuiltReason() {
    String path = RESOURCE_ROOT + "linux-x86_64/" + BUILD_INFO;
    try (InputStream in = NativeLibrary.class.getResourceAsStream(path)) {
      if (in == null) {
        return null; // not from this build: resource() names what is missing
      }
      java.util.Properties p = new java.util.Properties();
      p.load(in);
      return "false".equals(p.getProperty("built")) ? p.getProperty("reason", "(no reason recorded)") : null;
    } catch (IOException e) {
      throw new UncheckedIOException("reading resource " + path, e);
    }
  }

  private static final class Holder {
    private static final Throwable FAILURE = tryLoad();

    static void check() {
      if (FAILURE != null) {
        throw new IllegalStateException("libslipstream_jni.so could not be loaded: " + FAILURE.getMessage(), FAILURE);
      }
    }

    private static Throwable tryLoad() {
      try {
        String unbuilt = unbuiltReason(); // decides even if an earlier build left a library behind
        if (unbuilt != null) {
          return new IllegalStateException("this jar was built without the GPU binding: " + unbuilt);
        }
        byte[] lib = resource(LIBRARY);
        Path dir = Files.createTempDirectory("slipstream-native-");
        Path file = dir.resolve(LIBRARY);
        Files.write(file, lib);
        // Deleted in reverse order of registration: the file first, then its folder.
        dir.toFile().deleteOnExit();
        file.toFile().deleteOnExit();
        System.load(file.toAbsolutePath().toString());
        return null;
      } catch (Throwable t) { // UnsatisfiedLinkError, I/O, or an unsupported platform: kept as the reason
        return t;
      }
    }
  }
}
