package dev.slipstream.gpu;

import dev.slipstream.core.transport.MemoryKind;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * The receiving JVM of {@link PeerPushGpuTest}: registers a device region on its GPU, prints
 * {@code DESC <hex>}, then on {@code VERIFY <sigOffset> <n> (<src> <dst> <len>)*} checks that every
 * item landed byte-exact, that nothing else was written, and that the signal word equals
 * (n, total bytes); prints {@code OK} or {@code FAIL <what>}.
 */
public final class GpuPeerMain {
  private GpuPeerMain() {}

  public static void main(String[] args) throws Exception {
    int device = Integer.parseInt(args[0]);
    long length = Long.parseLong(args[1]);
    int id = Integer.parseInt(args[2]);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
    try (GpuContext ctx = GpuContext.open(device); GpuRegion region = GpuRegion.create(ctx, MemoryKind.DEVICE, length, id)) {
      region.fill((byte) 0);
      System.out.println("DESC " + HexFormat.of().formatHex(region.export().encode()));
      System.out.flush();
      String line = in.readLine();
      if (line == null || !line.startsWith("VERIFY ")) {
        System.out.println("FAIL expected a VERIFY line, got " + line);
        return;
      }
      String[] f = line.split(" ");
      long sigOffset = Long.parseLong(f[1]);
      int n = Integer.parseInt(f[2]);
      byte[] expected = new byte[(int) length];
      long total = 0;
      for (int i = 0; i < n; i++) {
        long src = Long.parseLong(f[3 + 3 * i]);
        long dst = Long.parseLong(f[4 + 3 * i]);
        int len = Integer.parseInt(f[5 + 3 * i]);
        System.arraycopy(GpuTestSupport.pattern(src, len), 0, expected, (int) dst, len);
        total += len;
      }
      ByteBuffer.wrap(expected).order(ByteOrder.LITTLE_ENDIAN).putLong((int) sigOffset, GpuTestSupport.signal(n, total));
      byte[] got = region.read(0, (int) length);
      for (int i = 0; i < got.length; i++) {
        if (got[i] != expected[i]) {
          System.out.println("FAIL byte " + i + " is " + got[i] + ", expected " + expected[i]);
          return;
        }
      }
      System.out.println("OK " + n + " items, " + total + " bytes, signal after the data");
    }
  }
}
