package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.MemoryKind;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Two JVMs: a child ({@link GpuPeerMain}) registers a device region on the second GPU (the first if
 * there is one) and sends its descriptor; this JVM decodes and imports it through CUDA IPC, checks
 * forged requests, and pushes into it from the first GPU with the push kernel over the nvlink
 * queue; the child checks every byte and the signal.
 */
class PeerPushGpuTest {
  private static final long LENGTH = 4L << 20;
  private static final int PEER_REGION = 77;

  @Test
  void pushesIntoAnotherJvmsRegionOnAnotherGpuByteExact() throws Exception {
    GpuProbe probe = GpuTestSupport.assumeGpu();
    int peerDevice = probe.deviceCount() >= 2 ? 1 : 0;
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process child = new ProcessBuilder(java, "-Xcheck:jni", "-cp", System.getProperty("java.class.path"),
        GpuPeerMain.class.getName(), Integer.toString(peerDevice), Long.toString(LENGTH), Integer.toString(PEER_REGION))
        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    try (BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.US_ASCII));
        Writer toChild = new OutputStreamWriter(child.getOutputStream(), StandardCharsets.US_ASCII)) {
      String line = protocolLine(out, "DESC ");
      byte[] wire = HexFormat.of().parseHex(line.substring(5));
      RegionExport desc = RegionExport.decode(wire);
      assertEquals(MemoryKind.DEVICE, desc.kind());
      assertEquals(peerDevice, desc.device());
      assertEquals(LENGTH, desc.length());
      assertEquals(child.pid(), desc.ownerPid());

      try (GpuContext ctx = GpuContext.open(0);
          GpuRegion src = GpuRegion.create(ctx, MemoryKind.DEVICE, LENGTH, 5)) {
        // Forged descriptors: Java rejects a wrong magic before the library sees it; the library
        // refuses one that claims to come from this process.
        byte[] badMagic = wire.clone();
        badMagic[0] ^= 1;
        assertThrows(IllegalArgumentException.class, () -> RemoteRegion.importFrom(ctx, badMagic));
        byte[] ownPid = wire.clone();
        ByteBuffer.wrap(ownPid).order(ByteOrder.LITTLE_ENDIAN).putLong(32, ProcessHandle.current().pid());
        GpuException self = assertThrows(GpuException.class, () -> RemoteRegion.importFrom(ctx, ownPid));
        assertEquals(SlipStatus.SLIP_ERR_BAD_DESCRIPTOR, self.status());

        try (RemoteRegion remote = RemoteRegion.importFrom(ctx, wire)) {
          assertEquals(PEER_REGION, remote.id());
          assertEquals(LENGTH, remote.length());
          // Write requests are checked against the imported region; the message never shows the real key.
          GpuException key = assertThrows(GpuException.class,
              () -> remote.checkWrite(PEER_REGION, desc.key() ^ 1, 0, 16));
          assertEquals(SlipStatus.SLIP_ERR_BAD_KEY, key.status());
          assertFalse(key.getMessage().contains(String.format("%016x", desc.key())), key.getMessage());
          GpuException range = assertThrows(GpuException.class,
              () -> remote.checkWrite(PEER_REGION, desc.key(), LENGTH - 8, 16));
          assertEquals(SlipStatus.SLIP_ERR_OUT_OF_RANGE, range.status());
          assertTrue(range.getMessage().contains("offset " + (LENGTH - 8) + " + length 16 outside region " + PEER_REGION
              + " (length " + LENGTH + ")"), range.getMessage());
          remote.checkWrite(PEER_REGION, desc.key(), 0, LENGTH);

          src.write(0, GpuTestSupport.pattern(0, (int) LENGTH));
          List<PushKernel.Item> items = List.of(new PushKernel.Item(0, 0, 1), new PushKernel.Item(100, 4096, 4097),
              new PushKernel.Item(8192, 65536, 65536), new PushKernel.Item(200_000, 1 << 20, (1 << 20) + 3),
              new PushKernel.Item(7, 3 << 20, 100_000));
          long sigOffset = LENGTH - 8;
          try (QueueSet qs = QueueSet.create(ctx, Backend.NVLINK, 1, 0, List.of(src), List.of(remote));
              PushKernel k = PushKernel.load(ctx)) {
            SlipStatus[] st = k.push(qs, List.of(new PushKernel.Queue(0, 1, 1, sigOffset)), List.of(items), 2, 256,
                30_000);
            assertArrayEquals(new SlipStatus[] {SlipStatus.SLIP_OK}, st);
            qs.check(false);
          }
          List<String> verify = new ArrayList<>(List.of("VERIFY", Long.toString(sigOffset),
              Integer.toString(items.size())));
          for (PushKernel.Item it : items) {
            verify.add(Long.toString(it.srcOffset()));
            verify.add(Long.toString(it.dstOffset()));
            verify.add(Long.toString(it.length()));
          }
          toChild.write(String.join(" ", verify) + "\n");
          toChild.flush();
          String verdict = protocolLine(out, "OK ", "FAIL ");
          assertTrue(verdict.startsWith("OK "), "child: " + verdict);
        }
      }
    } finally {
      if (!child.waitFor(60, TimeUnit.SECONDS)) {
        child.destroyForcibly();
      }
    }
    assertEquals(0, child.exitValue(), "child exit status");
  }

  /**
   * The child's next line that starts with one of {@code prefixes}; other lines (-Xcheck:jni
   * writes its warnings to standard output) are echoed to standard error and skipped.
   */
  private static String protocolLine(BufferedReader out, String... prefixes) throws java.io.IOException {
    for (String line; (line = out.readLine()) != null; ) {
      for (String p : prefixes) {
        if (line.startsWith(p)) {
          return line;
        }
      }
      System.err.println("child: " + line);
    }
    throw new AssertionError("child exited before a line starting with " + String.join(" or ", prefixes));
  }
}
