package dev.slipstream.gpu;

import dev.slipstream.core.transport.MemoryKind;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A holder checks the allocation it really mapped from a reader's CUDA IPC handle against the length
 * the descriptor claims (cuMemGetAddressRange) before any push: a child JVM ({@link GpuPeerMain})
 * exports a 4 MiB device region; its genuine descriptor passes, one claiming 8 MiB (the same handle)
 * is refused naming both sizes, and the child finds its region untouched. Also a region of this
 * process, through its alias.
 */
class ImportedLandingGpuTest {
  private static final long LENGTH = 4L << 20;

  @Test
  void anImportedAllocationSmallerThanClaimedIsRefused() throws Exception {
    GpuProbe probe = GpuTestSupport.assumeGpu();
    int peerDevice = probe.deviceCount() >= 2 ? 1 : 0;
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process child = new ProcessBuilder(java, "-Xcheck:jni", "-cp", System.getProperty("java.class.path"),
        GpuPeerMain.class.getName(), Integer.toString(peerDevice), Long.toString(LENGTH), "78")
        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    try (BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.US_ASCII));
        Writer toChild = new OutputStreamWriter(child.getOutputStream(), StandardCharsets.US_ASCII);
        GpuContext ctx = GpuContext.open(0)) {
      String line = line(out, "DESC ");
      byte[] wire = HexFormat.of().parseHex(line.substring(5));
      try (RemoteRegion genuine = RemoteRegion.importFrom(ctx, wire)) {
        genuine.checkMappedLength(ctx);
      }
      byte[] longer = wire.clone();
      ByteBuffer.wrap(longer).order(ByteOrder.LITTLE_ENDIAN).putLong(24, 2 * LENGTH); // slip_region_desc.length
      try (RemoteRegion claimed = RemoteRegion.importFrom(ctx, longer)) {
        assertEquals(2 * LENGTH, claimed.length(), "the library takes the claimed length as it is");
        GpuException e = assertThrows(GpuException.class, () -> claimed.checkMappedLength(ctx));
        assertEquals(SlipStatus.SLIP_ERR_BAD_DESCRIPTOR, e.status());
        assertTrue(e.getMessage().contains("claims " + 2 * LENGTH + " bytes") && e.getMessage().contains("has "),
            e.getMessage());
      }
      toChild.write("VERIFY 0 0\n"); // nothing was written: the region is all zeros
      toChild.flush();
      String verdict = line(out, "OK ", "FAIL ");
      assertTrue(verdict.startsWith("OK "), "child: " + verdict);
    } finally {
      if (!child.waitFor(60, TimeUnit.SECONDS)) {
        child.destroyForcibly();
      }
    }
    assertEquals(0, child.exitValue(), "child exit status");
  }

  @Test
  void aLocalRegionsAliasCoversItsLength() {
    GpuTestSupport.assumeGpu();
    try (GpuContext ctx = GpuContext.open(0);
        GpuRegion region = GpuRegion.create(ctx, MemoryKind.DEVICE, 1 << 20, 9);
        RemoteRegion alias = RemoteRegion.alias(region)) {
      alias.checkMappedLength(ctx);
      long[] range = CudaDriver.addressRange(region.devicePointer());
      assertTrue(range[0] <= region.devicePointer() && range[1] >= 1 << 20, range[0] + " " + range[1]);
      GpuException e = assertThrows(GpuException.class, () -> RemoteRegion.checkExtent(9, region.devicePointer(),
          range[1] + 1, range[0], range[1]));
      assertEquals(SlipStatus.SLIP_ERR_BAD_DESCRIPTOR, e.status());
    }
  }

  private static String line(BufferedReader out, String... prefixes) throws java.io.IOException {
    for (String l; (l = out.readLine()) != null; ) {
      for (String p : prefixes) {
        if (l.startsWith(p)) {
          return l;
        }
      }
      System.err.println("child: " + l);
    }
    throw new AssertionError("child exited before a line starting with " + String.join(" or ", prefixes));
  }
}
