package dev.slipstream.bench.tpch;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import javax.imageio.ImageIO;

/**
 * Draws the benchmark chart with Java2D (headless): top, the median time per query per manager
 * with a min-max whisker; bottom, each Slipstream manager's time over the baseline's per query
 * (sort, or in the GPU mode RAPIDS' own manager), with lines at 1.0 and at the target's 1.05. Shuffle-heavy queries are marked with {@code *}.
 */
final class ChartWriter {
  private static final Color[] COLORS = {new Color(0x7f7f7f), new Color(0x1f77b4), new Color(0xff7f0e),
      new Color(0x2ca02c)};
  private static final int W = 1400;
  private static final int H = 900;
  private static final int LEFT = 80;
  private static final int RIGHT = 30;

  private ChartWriter() {}

  static void write(BenchResults r, Path file) throws IOException {
    System.setProperty("java.awt.headless", "true");
    BufferedImage img = new BufferedImage(W, H, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = img.createGraphics();
    try {
      g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
      g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
      g.setColor(Color.WHITE);
      g.fillRect(0, 0, W, H);
      g.setColor(Color.BLACK);
      g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 16));
      BenchOptions o = r.options();
      g.drawString(String.format(Locale.ROOT, "TPC-H SF%s, %d executors x %d core(s): median time per query "
          + "(whiskers: min-max of %d rounds)", TpchBenchmark.fmt(o.scaleFactor()), o.executors(), o.cores(),
          r.runs().stream().filter(x -> !x.warmup()).map(BenchResults.Run::round).distinct().count()),
          LEFT, 28);
      times(g, r, 50, 520);
      ratios(g, r, 590, 850);
    } finally {
      g.dispose();
    }
    ImageIO.write(img, "png", file.toFile());
  }

  private static void times(Graphics2D g, BenchResults r, int top, int bottom) {
    List<String> qs = r.queries();
    List<String> ms = charted(r);
    long max = 1;
    for (String q : qs) {
      for (String m : ms) {
        BenchResults.Stat s = r.stat(q, m);
        max = Math.max(max, s == null ? 0 : s.maxMillis());
      }
    }
    double maxS = niceCeil(max / 1000.0);
    axis(g, top, bottom, maxS, "s");
    double slot = (W - LEFT - RIGHT) / (double) qs.size();
    double bar = slot * 0.8 / ms.size();
    for (int i = 0; i < qs.size(); i++) {
      for (int k = 0; k < ms.size(); k++) {
        BenchResults.Stat s = r.stat(qs.get(i), ms.get(k));
        if (s == null) {
          continue;
        }
        int x = (int) (LEFT + i * slot + slot * 0.1 + k * bar);
        int y = y(s.medianMillis() / 1000.0, maxS, top, bottom);
        g.setColor(COLORS[k % COLORS.length]);
        g.fillRect(x, y, Math.max(1, (int) bar - 1), bottom - y);
        g.setColor(Color.BLACK);
        int cx = x + (int) (bar / 2);
        g.drawLine(cx, y(s.minMillis() / 1000.0, maxS, top, bottom), cx, y(s.maxMillis() / 1000.0, maxS, top, bottom));
      }
      label(g, r, qs.get(i), (int) (LEFT + i * slot + slot / 2), bottom + 16);
    }
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 13));
    for (int k = 0; k < ms.size(); k++) {
      g.setColor(COLORS[k % COLORS.length]);
      g.fillRect(LEFT + 20 + k * 220, top + 6, 14, 14);
      g.setColor(Color.BLACK);
      g.drawString(ms.get(k), LEFT + 40 + k * 220, top + 18);
    }
  }

  private static void ratios(Graphics2D g, BenchResults r, int top, int bottom) {
    List<String> qs = r.queries();
    List<String> ms = r.compared();
    g.setColor(Color.BLACK);
    g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 15));
    StringBuilder title = new StringBuilder("Slipstream time / " + r.baseline() + " time per query (below 1 = faster)");
    for (String m : ms) {
      title.append(String.format(Locale.ROOT, "   %s, shuffle-heavy total: %.2f", m,
          r.totalRatio(m, r.heavyQueries())));
    }
    g.drawString(title.toString(), LEFT, top - 14);
    double maxR = 1.5;
    for (String q : qs) {
      for (String m : ms) {
        double v = r.ratio(q, m);
        if (!Double.isNaN(v)) {
          maxR = Math.max(maxR, Math.ceil(v * 4) / 4);
        }
      }
    }
    axis(g, top, bottom, maxR, "");
    g.setStroke(new BasicStroke(1.5f));
    g.setColor(Color.BLACK);
    g.drawLine(LEFT, y(1.0, maxR, top, bottom), W - RIGHT, y(1.0, maxR, top, bottom));
    g.setColor(Color.RED);
    g.setStroke(new BasicStroke(1f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {6f, 4f}, 0f));
    int y105 = y(BenchResults.TARGET_MAX_QUERY_RATIO, maxR, top, bottom);
    g.drawLine(LEFT, y105, W - RIGHT, y105);
    int y77 = y(BenchResults.TARGET_HEAVY_RATIO, maxR, top, bottom);
    g.setColor(new Color(0x2ca02c));
    g.drawLine(LEFT, y77, W - RIGHT, y77);
    g.setStroke(new BasicStroke(1f));
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
    g.drawString("0.77 (target, shuffle-heavy total)", W - RIGHT - 200, y77 + 13);
    g.setColor(Color.RED);
    g.drawString("1.05 (target, any query)", W - RIGHT - 200, y105 - 4);
    double slot = (W - LEFT - RIGHT) / (double) qs.size();
    double bar = slot * 0.6 / Math.max(1, ms.size());
    for (int i = 0; i < qs.size(); i++) {
      for (int k = 0; k < ms.size(); k++) {
        double v = r.ratio(qs.get(i), ms.get(k));
        if (Double.isNaN(v)) {
          continue;
        }
        int x = (int) (LEFT + i * slot + slot * 0.2 + k * bar);
        int y = y(v, maxR, top, bottom);
        g.setColor(COLORS[charted(r).indexOf(ms.get(k)) % COLORS.length]);
        g.fillRect(x, y, Math.max(1, (int) bar - 1), bottom - y);
      }
      label(g, r, qs.get(i), (int) (LEFT + i * slot + slot / 2), bottom + 16);
    }
  }

  /** The managers in the time chart: all, but in the GPU mode not CPU Spark (its one run is in the report). */
  private static List<String> charted(BenchResults r) {
    List<String> ms = new java.util.ArrayList<>(r.managers());
    if (r.options().gpu()) {
      ms.remove("sort");
    }
    return ms;
  }

  private static void label(Graphics2D g, BenchResults r, String q, int cx, int y) {
    g.setColor(Color.BLACK);
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
    String s = q + (r.heavy(q) ? "*" : "");
    g.drawString(s, cx - g.getFontMetrics().stringWidth(s) / 2, y);
  }

  private static void axis(Graphics2D g, int top, int bottom, double max, String unit) {
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
    for (int i = 0; i <= 5; i++) {
      double v = max * i / 5;
      int y = y(v, max, top, bottom);
      g.setColor(new Color(0xdddddd));
      g.drawLine(LEFT, y, W - RIGHT, y);
      g.setColor(Color.BLACK);
      String s = String.format(Locale.ROOT, max < 10 ? "%.2f%s" : "%.0f%s", v, unit);
      g.drawString(s, LEFT - 8 - g.getFontMetrics().stringWidth(s), y + 4);
    }
    g.drawLine(LEFT, top, LEFT, bottom);
    g.drawLine(LEFT, bottom, W - RIGHT, bottom);
  }

  private static int y(double v, double max, int top, int bottom) {
    return (int) Math.round(bottom - (bottom - top) * Math.min(v, max) / max);
  }

  private static double niceCeil(double v) {
    double p = Math.pow(10, Math.floor(Math.log10(v)));
    for (double m : new double[] {1, 2, 2.5, 5, 10}) {
      if (v <= m * p) {
        return m * p;
      }
    }
    return 10 * p;
  }
}
