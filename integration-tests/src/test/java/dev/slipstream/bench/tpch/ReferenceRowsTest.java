package dev.slipstream.bench.tpch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ReferenceRowsTest {
  private static final String SQL = "SELECT 1";
  private static final BenchResults.CpuFigures CPU = new BenchResults.CpuFigures(1000, 250);

  @TempDir
  Path dir;

  @Test
  void rowsComeBackAsStoredWithTheirFigures() {
    List<String> rows = List.of("[1,a\\b,2.50]", "[2,line\nbreak,x\r]", "[3,,\\n literal]");
    new ReferenceRows(dir, 10, "4.2.0").store("q01", SQL, rows, CPU);
    List<String> why = new ArrayList<>();
    Optional<ReferenceRows.Stored> got = new ReferenceRows(dir, 10, "4.2.0").load("q01", SQL, why::add);
    assertTrue(got.isPresent(), why.toString());
    assertEquals(rows, got.get().rows());
    assertEquals(CPU, got.get().cpu());
    assertEquals(dir.resolve("sf10").resolve("q01.rows"), new ReferenceRows(dir, 10, "4.2.0").file("q01"));
    assertTrue(why.isEmpty(), why.toString());
  }

  @Test
  void noFileIsNoReferenceAndNoComplaint() {
    List<String> why = new ArrayList<>();
    assertTrue(new ReferenceRows(dir, 1, "4.2.0").load("q02", SQL, why::add).isEmpty());
    assertTrue(why.isEmpty(), why.toString());
  }

  @Test
  void anotherSparkScaleFactorOrQueryTextIsNotUsed() {
    new ReferenceRows(dir, 3, "4.2.0").store("q03", SQL, List.of("[1]"), CPU);
    List<String> why = new ArrayList<>();
    assertTrue(new ReferenceRows(dir, 3, "4.1.0").load("q03", SQL, why::add).isEmpty());
    assertTrue(why.get(0).contains("spark=4.2.0") && why.get(0).contains("spark=4.1.0"), why.get(0));
    assertTrue(new ReferenceRows(dir, 3, "4.2.0").load("q03", SQL + " ", why::add).isEmpty());
    assertTrue(why.get(1).contains("sql-sha256="), why.get(1));
    // Another scale factor is another folder: no file there.
    assertTrue(new ReferenceRows(dir, 1, "4.2.0").load("q03", SQL, why::add).isEmpty());
    assertEquals(2, why.size(), why.toString());
  }

  @Test
  void truncatedOrDamagedFilesAreRefusedNamingWhatWasFound() throws Exception {
    ReferenceRows r = new ReferenceRows(dir, 1, "4.2.0");
    r.store("q04", SQL, List.of("[1]", "[2]", "[3]"), CPU);
    Path f = r.file("q04");
    List<String> lines = Files.readAllLines(f);
    Files.write(f, lines.subList(0, lines.size() - 1));
    List<String> why = new ArrayList<>();
    assertTrue(r.load("q04", SQL, why::add).isEmpty());
    assertTrue(why.get(0).contains("header says 3 rows but 2 follow"), why.get(0));

    List<String> bad = new ArrayList<>(lines);
    int at = bad.indexOf("cpuShuffleBytesWritten=250");
    bad.set(at, "cpuShuffleBytesWritten=lots");
    Files.write(f, bad);
    assertTrue(r.load("q04", SQL, why::add).isEmpty());
    assertTrue(why.get(1).contains("'cpuShuffleBytesWritten=lots', expected cpuShuffleBytesWritten=<count>"), why.get(1));

    Files.write(f, lines.subList(0, 2));
    assertTrue(r.load("q04", SQL, why::add).isEmpty());
    assertTrue(why.get(2).contains("another layout"), why.get(2));
  }

  @Test
  void storingAgainReplacesTheFileWhole() {
    ReferenceRows r = new ReferenceRows(dir, 1, "4.2.0");
    r.store("q05", SQL, List.of("[1]", "[2]"), CPU);
    r.store("q05", SQL, List.of("[9]"), new BenchResults.CpuFigures(5, 6));
    ReferenceRows.Stored got = r.load("q05", SQL, w -> { }).orElseThrow();
    assertEquals(List.of("[9]"), got.rows());
    assertEquals(new BenchResults.CpuFigures(5, 6), got.cpu());
  }
}
