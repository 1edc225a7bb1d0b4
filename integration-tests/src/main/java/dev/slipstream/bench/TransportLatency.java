package dev.slipstream.bench;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.tcp.TcpTransportProvider;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Round trip of a small message between two tcp transports of one JVM over 127.0.0.1: the sender
 * posts a 200-byte message (the size of a device write request) and spins until the 64-byte echo
 * arrives; the responder echoes from its event loop. What it measures is the message path of
 * Slipstream's transport (the sender's hand-off to its event loop, the socket, the receiving event
 * loop, the way back), as a reduce task sending a device write request sees the first leg.
 * {@code --pause-us} waits between round trips, so event loops go idle as they do between the
 * requests of a shuffle.
 *
 * <p>Usage: {@code TransportLatency [--messages 20000] [--pause-us 0] [--conf spark.k=v,...]}; prints
 * the median, 10th and 90th percentile round trip of the second half of the messages.
 */
public final class TransportLatency {
  private TransportLatency() {}

  public static void main(String[] args) throws Exception {
    int messages = 20_000;
    long pauseUs = 0;
    Map<String, String> conf = new HashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--messages" -> messages = Integer.parseInt(args[i + 1]);
        case "--pause-us" -> pauseUs = Long.parseLong(args[i + 1]);
        case "--conf" -> {
          for (String kv : args[i + 1].split(",")) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
              throw new IllegalArgumentException("--conf: got '" + kv + "', expected spark.key=value[,...]");
            }
            conf.put(kv.substring(0, eq), kv.substring(eq + 1));
          }
        }
        default -> throw new IllegalArgumentException("unknown option " + args[i]
            + ", expected --messages, --pause-us or --conf");
      }
    }
    if (messages < 2 || pauseUs < 0) {
      throw new IllegalArgumentException("--messages " + messages + ", --pause-us " + pauseUs
          + ": expected at least 2 messages and a pause >= 0");
    }
    TcpTransportProvider tcp = new TcpTransportProvider();
    AtomicLong echoes = new AtomicLong();
    try (Transport sender = tcp.create(TransportContext.of(ConfigSource.of(conf), "127.0.0.1", "sender"));
         Transport responder = tcp.create(TransportContext.of(ConfigSource.of(conf), "127.0.0.1", "responder"))) {
      sender.setMessageHandler((from, m) -> echoes.incrementAndGet());
      responder.setMessageHandler((from, m) -> {
        try {
          PeerQueue back = responder.connect(sender.localEndpoint());
          back.send(ByteBuffer.allocate(64));
          back.commit();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      });
      PeerQueue q = sender.connect(responder.localEndpoint());
      long[] rtt = new long[messages];
      for (int i = 0; i < messages; i++) {
        long t0 = System.nanoTime();
        q.send(ByteBuffer.allocate(200));
        q.commit();
        long deadline = t0 + 10_000_000_000L;
        while (echoes.get() <= i) {
          if (System.nanoTime() - deadline > 0) {
            throw new IllegalStateException("no echo of message " + i + " within 10 s");
          }
          Thread.onSpinWait();
        }
        rtt[i] = System.nanoTime() - t0;
        if (pauseUs > 0) {
          long until = System.nanoTime() + pauseUs * 1000;
          while (System.nanoTime() - until < 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(until - System.nanoTime());
          }
        }
      }
      long[] half = Arrays.copyOfRange(rtt, messages / 2, messages);
      Arrays.sort(half);
      System.out.printf("tcp message round trip, %d messages, pause %d us, conf %s: second half median %.1f us,"
          + " p10 %.1f us, p90 %.1f us%n", messages, pauseUs, conf, half[half.length / 2] / 1e3,
          half[half.length / 10] / 1e3, half[half.length * 9 / 10] / 1e3);
    }
  }
}
