package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The build on a machine with Java and Maven but no CMake and no CUDA toolkit: this machine's
 * tools with those two hidden (a PATH of links to every other program, and no CUDA folder). The
 * native scripts and the Maven phases that call them skip the native parts with one line saying
 * why and what is lost, and succeed.
 */
class JavaOnlyBuildTest {
  private static final Set<String> HIDDEN = Set.of("cmake", "ctest", "cpack", "ccmake", "nvcc", "ninja");
  private static final Path ROOT = Path.of(System.getProperty("slipstream.root.dir", "..")).toAbsolutePath().normalize();

  @TempDir static Path tmp;
  private static Path bin;

  /** A folder of links to every program on PATH except CMake's and the CUDA toolkit's. */
  @BeforeAll
  static void hideTheToolkit() throws IOException {
    bin = Files.createDirectories(tmp.resolve("bin"));
    for (String dir : System.getenv("PATH").split(File.pathSeparator)) {
      File[] files = new File(dir).listFiles();
      if (files == null || dir.contains("cuda")) {
        continue;
      }
      for (File f : files) {
        Path link = bin.resolve(f.getName());
        if (f.isFile() && f.canExecute() && !HIDDEN.contains(f.getName()) && !Files.exists(link, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
          Files.createSymbolicLink(link, f.toPath().toAbsolutePath());
        }
      }
    }
  }

  private record Run(int exit, List<String> lines) {}

  private static Run run(String... command) throws Exception {
    ProcessBuilder pb = new ProcessBuilder(command).directory(ROOT.toFile()).redirectErrorStream(true);
    Map<String, String> env = pb.environment();
    env.put("PATH", bin.toString());
    env.put("CUDA_HOME", tmp.resolve("no-cuda").toString());
    env.put("JAVA_HOME", System.getProperty("java.home"));
    Process p = pb.start();
    byte[] out = p.getInputStream().readAllBytes();
    assertTrue(p.waitFor(10, TimeUnit.MINUTES), "timed out: " + String.join(" ", command));
    List<String> lines = new ArrayList<>(new String(out, StandardCharsets.UTF_8).lines().toList());
    return new Run(p.exitValue(), lines);
  }

  private static List<String> matching(Run r, String part) {
    return r.lines().stream().filter(l -> l.contains(part)).toList();
  }

  @Test
  void theToolkitIsReallyHidden() throws Exception {
    Run r = run("bash", "-c", "command -v cmake; command -v nvcc; command -v java; command -v mvn; true");
    assertEquals(2, r.lines().size(), "only java and mvn are found: " + r.lines());
  }

  @Test
  void theNativeBuildSkipsWithOneLineAndSucceeds() throws Exception {
    Path build = tmp.resolve("native-build");
    Run r = run("bash", "native/build.sh", build.toString());
    assertEquals(0, r.exit(), String.join("\n", r.lines()));
    assertEquals(List.of("native/build.sh: SKIPPED: 'cmake' was not found (on PATH or in " + tmp.resolve("no-cuda")
        + "/bin); the native library and the CUDA kernels need CMake >= 3.24 and the CUDA toolkit; without them the"
        + " native library, the CUDA kernels and their tests are not built, and Slipstream runs on the host path only"
        + " (no GPU shuffles)"), r.lines());
    assertFalse(Files.exists(build), "nothing was built");
    Run required = run("env", "SLIP_REQUIRE_NATIVE=1", "bash", "native/build.sh", build.toString());
    assertEquals(2, required.exit(), "SLIP_REQUIRE_NATIVE=1 makes a missing toolkit an error");
  }

  @Test
  void theJarIsBuiltWithoutTheGpuBindingAndSaysWhy() throws Exception {
    Path out = tmp.resolve("jni-resources");
    Run r = run("bash", "native/build-jni.sh", out.toString(), tmp.resolve("jni-build").toString());
    assertEquals(0, r.exit(), String.join("\n", r.lines()));
    assertEquals(1, r.lines().size(), "one line: " + r.lines());
    assertTrue(r.lines().get(0).startsWith("native/build-jni.sh: SKIPPED: the GPU binding (JNI library and kernels)"
        + " is not built into the jar: 'cmake' was not found"), r.lines().get(0));
    String props = Files.readString(out.resolve("dev/slipstream/native/linux-x86_64/build.properties"));
    assertTrue(props.startsWith("built=false\nreason='cmake' was not found"), props);
  }

  @Test
  void theMavenPhasesThatBuildNativeCodeSucceedWithTheSkipLine() throws Exception {
    // The native module's test phase, and shuffle-gpu's build up to compile (into a build folder of its
    // own, so this build's outputs stay as they are).
    Run nativeTests = run("mvn", "-B", "-o", "-q", "-pl", "native", "test");
    assertEquals(0, nativeTests.exit(), String.join("\n", nativeTests.lines()));
    assertEquals(1, matching(nativeTests, "native/build.sh: SKIPPED:").size(), String.join("\n", nativeTests.lines()));
    Run gpu = run("mvn", "-B", "-o", "-q", "-pl", "shuffle-gpu", "-am", "compile", "-Dbuild.tag=-java-only");
    assertEquals(0, gpu.exit(), String.join("\n", gpu.lines()));
    assertEquals(1, matching(gpu, "native/build-jni.sh: SKIPPED:").size(), String.join("\n", gpu.lines()));
  }
}
