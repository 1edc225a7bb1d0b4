package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;

/**
 * When a holder served one write request, as {@link System#nanoTime()} instants on the holder's
 * host, sent back with its {@code WriteResult} so the reader can break a request's time down (a GPU
 * reader and its holder share one host, so CLOCK_MONOTONIC is one clock for both); a writer that
 * does not measure sends {@link #NONE}. In order: the request
 * arrived ({@code received}), a serving thread took it ({@code started}), checks and pins were done
 * ({@code checked}), the push lane was set up ({@code laneReady}: table copied, source slots
 * rewritten), the push kernel was launched ({@code launched}) and its end seen ({@code ended}), and
 * the answer was handed to the transport ({@code answered}). 0 means not reached (a refused
 * request stops early); {@link #NONE} is all 0.
 *
 * <p>Immutable. On the wire: 7 longs, each 0 or not before the last non-zero one.
 */
public record ServeTimeline(long received, long started, long checked, long laneReady, long launched, long ended,
                            long answered) {
  public static final ServeTimeline NONE = new ServeTimeline(0, 0, 0, 0, 0, 0, 0);
  private static final String[] NAMES = {"received", "started", "checked", "lane ready", "launched", "ended",
      "answered"};

  /** The instants in order, {@link #NAMES} order. */
  public long[] marks() {
    return new long[] {received, started, checked, laneReady, launched, ended, answered};
  }

  /** The same timeline with {@code answered} set to {@code nanos}. */
  public ServeTimeline answeredAt(long nanos) {
    return new ServeTimeline(received, started, checked, laneReady, launched, ended, nanos);
  }

  public void write(WireWriter w) {
    for (long m : marks()) {
      w.putLong(m);
    }
  }

  /** Reads 7 instants; a non-zero one before an earlier non-zero one is malformed. */
  public static ServeTimeline read(WireReader r) throws TransportException {
    long[] m = new long[NAMES.length];
    long last = 0;
    String lastName = null;
    for (int i = 0; i < m.length; i++) {
      m[i] = r.getLong("serve timeline " + NAMES[i]);
      if (m[i] != 0) {
        if (lastName != null && m[i] - last < 0) {
          throw new TransportException(TransportError.MALFORMED, "serve timeline: " + NAMES[i] + " at " + m[i]
              + " ns, before " + lastName + " at " + last + " ns; expected instants in order (0: not reached)");
        }
        last = m[i];
        lastName = NAMES[i];
      }
    }
    return new ServeTimeline(m[0], m[1], m[2], m[3], m[4], m[5], m[6]);
  }
}
