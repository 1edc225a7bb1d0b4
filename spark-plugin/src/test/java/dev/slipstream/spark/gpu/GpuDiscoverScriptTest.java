package dev.slipstream.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** bin/slipstream-gpu-discover: one GPU per live claimant, a GPU listed twice claimable twice. */
class GpuDiscoverScriptTest {
  private static final Path SCRIPT = Path.of("..", "bin", "slipstream-gpu-discover").toAbsolutePath().normalize();

  private record Run(int rc, String out, String err) {}

  private static Run discover(Path claims, String gpus) throws IOException, InterruptedException {
    ProcessBuilder pb = new ProcessBuilder("bash", SCRIPT.toString());
    pb.environment().put("SLIPSTREAM_GPU_CLAIMS", claims.toString());
    pb.environment().put("SLIPSTREAM_GPUS", gpus);
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8).trim();
    return new Run(p.waitFor(), out, err);
  }

  @Test
  void eachCallClaimsAFreeGpuUntilNoneIsLeft(@TempDir Path claims) throws Exception {
    // The claimant is the caller's parent: this JVM, alive for the whole test.
    assertEquals(new Run(0, "{\"name\":\"gpu\",\"addresses\":[\"0\"]}", ""), discover(claims, "0,1"));
    assertEquals(new Run(0, "{\"name\":\"gpu\",\"addresses\":[\"1\"]}", ""), discover(claims, "0,1"));
    Run none = discover(claims, "0,1");
    assertEquals(1, none.rc());
    assertTrue(none.err().contains("every GPU (0 1) is claimed by a live process under " + claims), none.err());
  }

  @Test
  void aGpuListedTwiceIsClaimedTwice(@TempDir Path claims) throws Exception {
    assertEquals("{\"name\":\"gpu\",\"addresses\":[\"0\"]}", discover(claims, "0,0").out());
    assertEquals("{\"name\":\"gpu\",\"addresses\":[\"0\"]}", discover(claims, "0,0").out());
    assertEquals(1, discover(claims, "0,0").rc());
    assertTrue(Files.isDirectory(claims.resolve("0")) && Files.isDirectory(claims.resolve("0.1")));
  }

  @Test
  void aClaimWhoseOwnerIsGoneIsTakenOver(@TempDir Path claims) throws Exception {
    Files.createDirectories(claims.resolve("0"));
    Files.writeString(claims.resolve("0/pid"), "2147483646\n"); // above any pid_max: no such process
    assertEquals(new Run(0, "{\"name\":\"gpu\",\"addresses\":[\"0\"]}", ""), discover(claims, "0"));
    assertEquals(String.valueOf(ProcessHandle.current().pid()), Files.readString(claims.resolve("0/pid")).trim());
  }
}
