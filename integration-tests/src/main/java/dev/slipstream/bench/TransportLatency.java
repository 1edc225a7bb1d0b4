package dev.slipstream.bench;

import dev.slipstream.core.config.ConfigSource;
import dev.slipstream.core.shuffle.RequestRing;
import dev.slipstream.core.transport.PeerQueue;
import dev.slipstream.core.transport.Transport;
import dev.slipstream.core.transport.TransportContext;
import dev.slipstream.core.transport.tcp.TcpTransportProvider;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
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
 * <p>{@code --burst B} sends B messages back to back per round (as a reduce task sends its device
 * write requests to one holder) and also reports when each reached the responder's handler, from
 * the start of the round: the "to holder" leg of the GPU job's request phases. With {@code --handoff
 * pool} the responder's event loop hands each message to a pool of 4 threads, which records and
 * echoes it, as a holder hands requests to its serving threads ("queued"); {@code spin}: the same
 * with threads that poll for {@code --spin-us} (20000) after their last message before they park
 * ({@link dev.slipstream.core.shuffle.SpinningPool}); {@code loop} (the default) handles it on the
 * event loop. {@code --via ring} writes the messages into a {@link RequestRing} that a thread of the
 * responder polls (back to back for {@code --ring-poll-us}, 50000, after each message), as a GPU
 * holder serves its request ring (spark.slipstream.gpu.requestRing); the echo still goes over tcp.
 *
 * <p>Usage: {@code TransportLatency [--messages 20000] [--pause-us 0] [--burst 1] [--handoff loop|pool|spin] [--spin-us 20000] [--via tcp|ring] [--ring-poll-us 50000]
 * [--conf spark.k=v,...]}; prints the median, 10th and 90th percentile round trip of the second
 * half of the rounds, and with a burst the median arrival of each of its messages.
 */
public final class TransportLatency {
  private TransportLatency() {}

  public static void main(String[] args) throws Exception {
    int messages = 20_000;
    long pauseUs = 0;
    int burst = 1;
    String handoff = "loop";
    String via = "tcp";
    long ringPollUs = 50_000;
    long spinUs = 20_000;
    Map<String, String> conf = new HashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--messages" -> messages = Integer.parseInt(args[i + 1]);
        case "--pause-us" -> pauseUs = Long.parseLong(args[i + 1]);
        case "--burst" -> burst = Integer.parseInt(args[i + 1]);
        case "--handoff" -> {
          handoff = args[i + 1];
          if (!handoff.equals("loop") && !handoff.equals("pool") && !handoff.equals("spin")) {
            throw new IllegalArgumentException("--handoff: got '" + handoff + "', expected loop, pool or spin");
          }
        }
        case "--spin-us" -> spinUs = Long.parseLong(args[i + 1]);
        case "--via" -> {
          via = args[i + 1];
          if (!via.equals("tcp") && !via.equals("ring")) {
            throw new IllegalArgumentException("--via: got '" + via + "', expected tcp or ring");
          }
        }
        case "--ring-poll-us" -> ringPollUs = Long.parseLong(args[i + 1]);
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
            + ", expected --messages, --pause-us, --burst, --handoff, --spin-us, --via, --ring-poll-us or --conf");
      }
    }
    if (messages < 2 || pauseUs < 0 || burst < 1 || burst > 64) {
      throw new IllegalArgumentException("--messages " + messages + ", --pause-us " + pauseUs + ", --burst " + burst
          + ": expected at least 2 messages, a pause >= 0 and a burst of 1 to 64");
    }
    int b = burst;
    java.util.concurrent.ExecutorService workers = switch (handoff) {
      case "pool" -> java.util.concurrent.Executors.newFixedThreadPool(4);
      case "spin" -> dev.slipstream.core.shuffle.SpinningPool.fixed(4, spinUs * 1000, r -> {
        Thread t = new Thread(r, "latency-spin");
        t.setDaemon(true);
        return t;
      });
      default -> null;
    };
    java.util.concurrent.atomic.AtomicLongArray arrived = new java.util.concurrent.atomic.AtomicLongArray(b);
    Thread ringPoller = null;
    TcpTransportProvider tcp = new TcpTransportProvider();
    AtomicLong echoes = new AtomicLong();
    try (Transport sender = tcp.create(TransportContext.of(ConfigSource.of(conf), "127.0.0.1", "sender"));
         Transport responder = tcp.create(TransportContext.of(ConfigSource.of(conf), "127.0.0.1", "responder"))) {
      sender.setMessageHandler((from, m) -> echoes.incrementAndGet());
      java.util.function.Consumer<ByteBuffer> handle = m -> {
        int k = m.getInt(m.position());
        Runnable echo = () -> {
          arrived.set(k, System.nanoTime());
          try {
            PeerQueue back = responder.connect(sender.localEndpoint());
            back.send(ByteBuffer.allocate(64));
            back.commit();
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        };
        if (workers != null) {
          workers.execute(echo);
        } else {
          echo.run();
        }
      };
      responder.setMessageHandler((from, m) -> handle.accept(m));
      PeerQueue q = sender.connect(responder.localEndpoint());
      RequestRing.Producer producer = null;
      if (via.equals("ring")) {
        // The responder's side of a request ring, served as a GPU holder serves one (RequestRing.serve).
        Path dir = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
        RequestRing ring = RequestRing.create(dir, 256, 2048, 1_000_000_000L);
        producer = RequestRing.open(ring.path());
        long pollNanos = ringPollUs * 1000;
        Thread poller = new Thread(() -> {
          try (ring) {
            ring.serve(pollNanos, Thread.currentThread()::isInterrupted, m -> handle.accept(ByteBuffer.wrap(m)));
          } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
          }
        }, "latency-ring-poller");
        poller.setDaemon(true);
        poller.start();
        ringPoller = poller;
      }
      long[] rtt = new long[messages];
      long[][] arrival = new long[b][messages];
      for (int i = 0; i < messages; i++) {
        long t0 = System.nanoTime();
        for (int k = 0; k < b; k++) {
          if (producer != null) {
            byte[] m = new byte[200];
            ByteBuffer.wrap(m).putInt(0, k);
            if (!producer.offer(m)) {
              throw new IllegalStateException("request ring full in round " + i);
            }
          } else {
            q.send(ByteBuffer.allocate(200).putInt(0, k));
            q.commit();
          }
        }
        long deadline = t0 + 10_000_000_000L;
        while (echoes.get() < (long) (i + 1) * b) {
          if (System.nanoTime() - deadline > 0) {
            throw new IllegalStateException("no echo of round " + i + " within 10 s");
          }
          Thread.onSpinWait();
        }
        rtt[i] = System.nanoTime() - t0;
        for (int k = 0; k < b; k++) {
          arrival[k][i] = arrived.get(k) - t0;
        }
        if (pauseUs > 0) {
          long until = System.nanoTime() + pauseUs * 1000;
          while (System.nanoTime() - until < 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(until - System.nanoTime());
          }
        }
      }
      long[] half = Arrays.copyOfRange(rtt, messages / 2, messages);
      Arrays.sort(half);
      System.out.printf("%s message round trip, %d messages, pause %d us, conf %s: second half median %.1f us,"
          + " p10 %.1f us, p90 %.1f us%n", via.equals("ring") ? "ring (echo over tcp)" : "tcp", messages, pauseUs, conf,
          half[half.length / 2] / 1e3,
          half[half.length / 10] / 1e3, half[half.length * 9 / 10] / 1e3);
      if (b > 1 || workers != null) {
        StringBuilder sb = new StringBuilder();
        for (int k = 0; k < b; k++) {
          long[] h = Arrays.copyOfRange(arrival[k], messages / 2, messages);
          Arrays.sort(h);
          sb.append(k == 0 ? "" : ", ").append(String.format("%.1f", h[h.length / 2] / 1e3));
        }
        System.out.printf("  burst of %d, handed to %s: median arrival at the handler of each message, us from the"
            + " round's start: %s%n", b, switch (handoff) {
              case "pool" -> "a pool of 4 threads";
              case "spin" -> "4 threads polling " + spinUs + " us before they park";
              default -> via.equals("ring") ? "the ring's polling thread" : "the event loop";
            }, sb);
      }
    } finally {
      if (ringPoller != null) {
        ringPoller.interrupt();
      }
      if (workers != null) {
        workers.shutdownNow();
      }
    }
  }
}
