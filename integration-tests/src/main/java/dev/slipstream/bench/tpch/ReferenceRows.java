package dev.slipstream.bench.tpch;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;

/**
 * CPU Spark's rows of each query, kept between runs: {@code <dir>/sf<scale>/<query>.rows}. A file
 * holds a header naming what the rows depend on (the generated data's schema and scale factor, the
 * Spark version, the SHA-256 of the query text), CPU Spark's scan input and shuffle bytes of that
 * run (what tells shuffle-heavy queries apart when CPU Spark does not run again), the row count, and
 * then one row per line, as {@code Row.toString} writes it with backslashes and line breaks
 * escaped. A stored file is used only when its key lines match this run; otherwise CPU Spark runs
 * the query again and the file is rewritten.
 *
 * <p>The generator's data is the same on every machine for a scale factor (its parts depend only on
 * the scale factor, and money columns are decimals), so rows stored on one machine check runs on
 * another: the GPU mode then skips CPU Spark altogether when every selected query has its rows.
 *
 * <p>Threading: used by the runner's one thread.
 */
final class ReferenceRows {
  private static final String MAGIC = "# Slipstream TPC-H reference rows (CPU Spark, sort shuffle)";
  /** The lines after the key: CPU Spark's scan input and shuffle bytes of the stored run, then the row count. */
  private static final String[] FIGURES = {"cpuInputBytes", "cpuShuffleBytesWritten", "rows"};

  private final Path dir;
  private final List<String> key;

  /**
   * @param dir the folder of all scale factors' files
   * @param scaleFactor the run's scale factor
   * @param sparkVersion the Spark version the queries run on
   */
  ReferenceRows(Path dir, double scaleFactor, String sparkVersion) {
    this.dir = TpchGenerator.folder(dir, scaleFactor);
    this.key = List.of("schema=" + TpchGenerator.SCHEMA_VERSION, "scaleFactor=" + TpchBenchmark.fmt(scaleFactor),
        "spark=" + sparkVersion);
  }

  /** The file of {@code query}'s rows. */
  Path file(String query) {
    return dir.resolve(query + ".rows");
  }

  /** Stored rows of one query with CPU Spark's figures of that run. */
  record Stored(List<String> rows, BenchResults.CpuFigures cpu) {}

  /**
   * The stored rows of {@code query} with text {@code sql}, or empty where there is no file or its
   * header does not match this run ({@code why} then gets one line saying what differs).
   */
  Optional<Stored> load(String query, String sql, java.util.function.Consumer<String> why) {
    Path f = file(query);
    if (!Files.isRegularFile(f)) {
      return Optional.empty();
    }
    List<String> lines;
    try {
      lines = Files.readAllLines(f, StandardCharsets.UTF_8);
    } catch (IOException e) {
      why.accept(f + ": cannot read (" + e.getMessage() + "); CPU Spark runs " + query + " again");
      return Optional.empty();
    }
    List<String> want = key(sql);
    int n = want.size() + FIGURES.length;
    if (lines.size() < n || !lines.subList(0, want.size()).equals(want)) {
      why.accept(f + ": stored for " + (lines.size() >= want.size() ? lines.subList(1, want.size()) : "another layout")
          + ", this run is " + want.subList(1, want.size()) + "; CPU Spark runs " + query + " again");
      return Optional.empty();
    }
    long[] v = new long[FIGURES.length];
    for (int i = 0; i < FIGURES.length; i++) {
      String l = lines.get(want.size() + i);
      v[i] = l.startsWith(FIGURES[i] + "=") ? parse(l.substring(FIGURES[i].length() + 1)) : -1;
      if (v[i] < 0) {
        why.accept(f + ": line " + (want.size() + i + 1) + " is '" + l + "', expected " + FIGURES[i]
            + "=<count>; CPU Spark runs " + query + " again");
        return Optional.empty();
      }
    }
    if (v[2] != lines.size() - n) {
      why.accept(f + ": header says " + v[2] + " rows but " + (lines.size() - n) + " follow (truncated?); CPU Spark runs "
          + query + " again");
      return Optional.empty();
    }
    List<String> out = new ArrayList<>(lines.size() - n);
    for (String l : lines.subList(n, lines.size())) {
      out.add(unescape(l));
    }
    return Optional.of(new Stored(out, new BenchResults.CpuFigures(v[0], v[1])));
  }

  private static long parse(String s) {
    try {
      return Long.parseLong(s);
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /**
   * Stores CPU Spark's {@code rows} of {@code query} with that run's figures (written whole to a
   * temporary file, then renamed).
   */
  void store(String query, String sql, List<String> rows, BenchResults.CpuFigures cpu) {
    Path f = file(query);
    List<String> lines = new ArrayList<>(key(sql));
    lines.add(FIGURES[0] + "=" + cpu.inputBytes());
    lines.add(FIGURES[1] + "=" + cpu.shuffleBytesWritten());
    lines.add(FIGURES[2] + "=" + rows.size());
    rows.forEach(r -> lines.add(escape(r)));
    try {
      Files.createDirectories(dir);
      Path tmp = Files.createTempFile(dir, query, ".tmp");
      Files.write(tmp, lines, StandardCharsets.UTF_8);
      Files.move(tmp, f, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot store the reference rows of " + query + " in " + f, e);
    }
  }

  /** The header lines a stored file must match: magic, what the rows depend on, the query text's hash. */
  private List<String> key(String sql) {
    List<String> h = new ArrayList<>();
    h.add(MAGIC);
    h.addAll(key);
    h.add("sql-sha256=" + sha256(sql));
    return h;
  }

  static String escape(String row) {
    return row.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r");
  }

  static String unescape(String line) {
    StringBuilder b = new StringBuilder(line.length());
    for (int i = 0; i < line.length(); i++) {
      char c = line.charAt(i);
      if (c == '\\' && i + 1 < line.length()) {
        char d = line.charAt(++i);
        b.append(d == 'n' ? '\n' : d == 'r' ? '\r' : d);
      } else {
        b.append(c);
      }
    }
    return b.toString();
  }

  private static String sha256(String s) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("no SHA-256 in this JVM", e);
    }
  }
}
