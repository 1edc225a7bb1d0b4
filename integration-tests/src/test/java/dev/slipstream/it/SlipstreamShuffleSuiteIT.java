package dev.slipstream.it;

import dev.slipstream.bench.LocalCluster;
import dev.slipstream.spark.SlipstreamShuffleManager;
import java.io.File;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Spark's own {@code org.apache.spark.ShuffleSuite} (from the spark-core test-jar of the same
 * Spark version) run against Slipstream, the way Spark's {@code SortShuffleSuite} runs it against
 * sort shuffle: {@link #beforeAll()} sets the shuffle manager on the suite's {@code conf}. It runs
 * on the JUnit Platform through a ScalaTest engine, under failsafe.
 *
 * <p>Executors of its {@code local-cluster} tests get the plugin jar, this module's classes and
 * {@code shufflesuite-lib} (spark-core's test-jar and ScalaTest) on their class path: the suite's
 * closures are lambdas captured by {@code ShuffleSuite}, so deserializing one loads the suite.
 *
 * <p>Tests that cannot apply to a shuffle whose map output lives in registered memory rather
 * than in sort-shuffle files are tagged {@code org.scalatest.Ignore} (reported as skipped), each
 * with its reason in {@link #EXCLUDED} and in docs/spark-shufflesuite.md.
 */
public class SlipstreamShuffleSuiteIT extends org.apache.spark.ShuffleSuite {
  private static final String IGNORE = "org.scalatest.Ignore";

  /** Test name to the reason it cannot apply to Slipstream (docs/spark-shufflesuite.md). */
  static final Map<String, String> EXCLUDED = new LinkedHashMap<>();

  static {
    // Each of these looks for the files that sort shuffle writes through Spark's DiskBlockManager
    // (shuffle_<id>_<map>_0.data / .index); Slipstream writes none: map output lives in
    // registered memory and spills only above spark.slipstream.mapOutput.memoryBytes, into
    // Slipstream's own folder.
    EXCLUDED.put("shuffle with different compression settings (SPARK-3426)",
        "asserts that DiskBlockManager.getAllFiles() is non-empty after a local-mode shuffle; Slipstream's map"
            + " output is in registered memory, so there are no block-manager files (the shuffle itself runs)");
    EXCLUDED.put("[SPARK-4085] rerun map stage if reduce stage cannot find its local shuffle file",
        "deletes the sort-shuffle data and index files of map 0 and expects the map stage to rerun; Slipstream has"
            + " no such files to delete (lost map output is its executor's memory: FetchFailed, then recompute)");
    EXCLUDED.put("cannot find its local shuffle file if no execution of the stage and rerun shuffle",
        "asserts that sort-shuffle data and index files exist on disk after the job; Slipstream writes none");
    EXCLUDED.put("SPARK-36206: shuffle checksum detect disk corruption",
        "corrupts the sort-shuffle data file on disk and expects sort shuffle's checksum-file diagnosis ('corrupted"
            + " due to DISK_ISSUE'); Slipstream has no data file, and its own per-block checksums (corruption in"
            + " flight and at rest) are tested by shuffle-core's BlockChecksumTest");
  }

  @Override
  public void beforeAll() {
    super.beforeAll();
    for (String name : EXCLUDED.keySet()) {
      if (!testNames().contains(name)) {
        throw new IllegalStateException("excluded test '" + name + "' is not in ShuffleSuite of this Spark line; expected one of "
            + testNames());
      }
    }
    String lib = System.getProperty("slipstream.shufflesuite.lib");
    if (lib == null || !new File(lib).isDirectory()) {
      throw new IllegalStateException("slipstream.shufflesuite.lib is " + lib
          + ", expected the folder with spark-core's test-jar and ScalaTest (mvn verify sets it)");
    }
    String classPath = LocalCluster.executorClassPath() + File.pathSeparator + lib + File.separator + "*";
    conf().set("spark.shuffle.manager", SlipstreamShuffleManager.class.getName())
        .set("spark.executor.extraClassPath", classPath)
        .set("spark.ui.enabled", "false");
  }

  /**
   * The suite's tags plus {@code org.scalatest.Ignore} on each excluded test. The tag sets are
   * built through Java collections: calling Scala's {@code Set.+} from Java links against the
   * wrong erasure on Scala 2.12 ({@code NoSuchMethodError}, which made the engine drop the suite).
   */
  @Override
  @SuppressWarnings({"unchecked", "deprecation"}) // JavaConverters: the one converter API of both Scala 2.12 and 2.13
  public scala.collection.immutable.Map<String, scala.collection.immutable.Set<String>> tags() {
    scala.collection.immutable.Map<String, scala.collection.immutable.Set<String>> tags = super.tags();
    for (String name : EXCLUDED.keySet()) {
      java.util.Set<String> names = new java.util.LinkedHashSet<>();
      if (tags.contains(name)) {
        names.addAll(scala.collection.JavaConverters.setAsJavaSetConverter(tags.apply(name)).asJava());
      }
      names.add(IGNORE);
      scala.collection.mutable.Set<String> asScala =
          (scala.collection.mutable.Set<String>) scala.collection.JavaConverters.asScalaSetConverter(names).asScala();
      tags = tags.updated(name, asScala.toSet());
    }
    return tags;
  }
}
