package dev.slipstream.spark.gpu;

import dev.slipstream.core.shuffle.ServeTimeline;
import java.io.Serializable;
import java.util.Arrays;

/**
 * Where the time of a reduce task's device write requests went, summed over its requests: the
 * reader's instants ({@link System#nanoTime()}) around each request and the holder's
 * {@link ServeTimeline} sent back with the answer (the GPU path is one host, one clock). Phases, in
 * order ({@link #NAMES}):
 *
 * <ol>
 *   <li>{@code prepare}: reader reserves landing space (handed out zeroed) and sends the requests
 *       laid out before it in the same batch;
 *   <li>{@code to holder}: encoding and the transport to the holder's handler;
 *   <li>{@code queued}: until a serving thread takes it;
 *   <li>{@code check}: decode, checks, pins, the block table;
 *   <li>{@code lane}: a push lane (waiting for a free one, set up on first use), table copy, source slots;
 *   <li>{@code launch}: kernel arguments copied, launch call;
 *   <li>{@code kernel}: until the holder saw the kernel end;
 *   <li>{@code land}: from there until the reader saw the signal complete (watched with copies from
 *       the moment the request was sent) and checked the table; 0 when the reader saw it first.
 * </ol>
 *
 * A request served by a holder's resident kernel has no queue, lane or launch (those phases are 0):
 * {@code to holder} runs to the kernel taking it from the ring, {@code check} is the kernel's checks,
 * {@code kernel} its copy and table, {@code land} the answer's way back and the reader's read of
 * signal and table.
 *
 * <p>Besides the means, each request's software cost: from sent to landed, less the {@code kernel}
 * phase (the bytes' own time), kept for the first {@value #KEPT} requests so that its median and
 * tail are reported.
 *
 * <p>The holder's answer is not on the data path of the host-driven path (the reader trusts the
 * signal), so a request is added when both its data landed and its answer came, in either order,
 * and only with a complete holder timeline. Threading: thread-safe (answers complete on transport
 * threads).
 */
public final class RequestPhases implements Serializable {
  private static final long serialVersionUID = 3L;
  /** Requests whose software cost is kept for its distribution. */
  static final int KEPT = 4096;
  public static final String[] NAMES = {"prepare", "to holder", "queued", "check", "lane", "launch", "kernel",
      "land"};

  private final long[] sums = new long[NAMES.length];
  private int requests;
  private long[] software = new long[16];
  private int kept;

  /**
   * Adds one request: preparation began at {@code start}, it was sent at {@code sent}, the holder
   * served it as {@code t}, and the reader saw it landed at {@code landed}. Returns false (adding
   * nothing) when {@code t} is incomplete.
   */
  public synchronized boolean add(long start, long sent, ServeTimeline t, long landed) {
    long[] h = t.marks();
    for (long m : h) {
      if (m == 0) {
        return false;
      }
    }
    long[] at = {start, sent, t.received(), t.started(), t.checked(), t.laneReady(), t.launched(), t.ended(), landed};
    long copy = 0;
    for (int i = 0; i < NAMES.length; i++) {
      long d = Math.max(0, at[i + 1] - at[i]);
      sums[i] += d;
      if (i == KERNEL) {
        copy = d;
      }
    }
    keep(Math.max(0, landed - sent - copy));
    requests++;
    return true;
  }

  private static final int KERNEL = 6;

  private void keep(long nanos) {
    if (kept == KEPT) {
      return;
    }
    if (kept == software.length) {
      software = Arrays.copyOf(software, Math.min(KEPT, 2 * kept));
    }
    software[kept++] = nanos;
  }

  /**
   * The software cost of the requests kept (sent to landed, less the kernel phase), sorted,
   * nanoseconds.
   */
  public synchronized long[] softwareNanos() {
    long[] v = Arrays.copyOf(software, kept);
    Arrays.sort(v);
    return v;
  }

  /** Requests added. */
  public synchronized int requests() {
    return requests;
  }

  /** Nanoseconds summed over the requests added, per phase ({@link #NAMES} order). */
  public synchronized long[] sums() {
    return sums.clone();
  }

  public synchronized RequestPhases snapshot() {
    RequestPhases c = new RequestPhases();
    System.arraycopy(sums, 0, c.sums, 0, sums.length);
    c.requests = requests;
    c.software = Arrays.copyOf(software, Math.max(16, kept));
    c.kept = kept;
    return c;
  }

  /** This and {@code o} together. */
  public RequestPhases plus(RequestPhases o) {
    RequestPhases c = snapshot();
    RequestPhases other = o.snapshot();
    for (int i = 0; i < c.sums.length; i++) {
      c.sums[i] += other.sums[i];
    }
    c.requests += other.requests;
    for (int i = 0; i < other.kept; i++) {
      c.keep(other.software[i]);
    }
    return c;
  }

  /** One line: per phase the mean microseconds per request, and the mean total. */
  public synchronized String describe() {
    if (requests == 0) {
      return "no request with a complete holder timeline";
    }
    StringBuilder b = new StringBuilder();
    long total = 0;
    for (int i = 0; i < NAMES.length; i++) {
      b.append(i == 0 ? "" : ", ").append(NAMES[i]).append(' ')
          .append(String.format("%.0f", sums[i] / 1e3 / requests));
      total += sums[i];
    }
    long[] sw = softwareNanos();
    return String.format("%d requests, mean us per request: %s; total %.0f; software (sent to landed, less the"
        + " kernel phase) median %.1f us, p90 %.1f, of %d", requests, b, total / 1e3 / requests, sw[sw.length / 2] / 1e3,
        sw[(int) (sw.length * 0.9)] / 1e3, sw.length);
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof RequestPhases p)) {
      return false;
    }
    RequestPhases a = snapshot();
    RequestPhases b = p.snapshot(); // one lock at a time
    return a.requests == b.requests && Arrays.equals(a.sums, b.sums)
        && Arrays.equals(a.softwareNanos(), b.softwareNanos());
  }

  @Override
  public synchronized int hashCode() {
    return 31 * requests + Arrays.hashCode(sums);
  }
}
