package dev.slipstream.bench.tpch;

import java.io.PrintStream;
import java.util.Locale;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Live progress: one line per finished query, and on a terminal a status line redrawn twice a
 * second with the running query, its elapsed time and an estimate of the time left.
 *
 * <p>Threading: the runner calls every method; a daemon thread redraws the status line. All
 * printing goes through this object's monitor.
 */
public final class Progress implements AutoCloseable {
  private final PrintStream out;
  private final boolean live;
  private final ScheduledExecutorService ticker;
  private final long startNanos = System.nanoTime();
  private int total;
  private int done;
  private String running;
  private long runningSince;
  private boolean statusShown;

  public Progress(PrintStream out) {
    this(out, System.console() != null);
  }

  public Progress(PrintStream out, boolean live) {
    this.out = out;
    this.live = live;
    this.ticker = live ? Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "progress");
      t.setDaemon(true);
      return t;
    }) : null;
    if (live) {
      ticker.scheduleAtFixedRate(this::redraw, 500, 500, TimeUnit.MILLISECONDS);
    }
  }

  public synchronized void total(int n) {
    total = n;
  }

  public synchronized void println(String line) {
    clearStatus();
    out.println(line);
  }

  public synchronized void start(int round, boolean warmup, String manager, String query) {
    running = String.format(Locale.ROOT, "round %d%s %-15s %s", round + 1, warmup ? " (warm-up)" : "", manager, query);
    runningSince = System.nanoTime();
    redraw();
  }

  public synchronized void finish(int round, boolean warmup, String manager, String query, long millis, int rows,
      String verdict) {
    done++;
    running = null;
    clearStatus();
    out.println(String.format(Locale.ROOT, "[%3d/%d] round %d%s %-15s %s %8d ms %6d rows  %s", done, total,
        round + 1, warmup ? " warm-up" : "        ", manager, query, millis, rows, verdict));
    redraw();
  }

  public synchronized void done() {
    running = null;
    clearStatus();
  }

  private synchronized void redraw() {
    if (!live || running == null) {
      return;
    }
    double elapsed = (System.nanoTime() - startNanos) / 1e9;
    String eta = done == 0 ? "?" : formatSeconds(elapsed / done * (total - done));
    String s = String.format(Locale.ROOT, "  > %s  %.1f s   [%d/%d done, about %s left]", running,
        (System.nanoTime() - runningSince) / 1e9, done, total, eta);
    out.print("\r" + s + "\u001b[K");
    out.flush();
    statusShown = true;
  }

  private void clearStatus() {
    if (statusShown) {
      out.print("\r\u001b[K");
      statusShown = false;
    }
  }

  static String formatSeconds(double s) {
    return s < 90 ? String.format(Locale.ROOT, "%.0f s", s) : String.format(Locale.ROOT, "%.0f min", s / 60);
  }

  @Override
  public void close() {
    if (ticker != null) {
      ticker.shutdownNow();
    }
    done();
  }
}
