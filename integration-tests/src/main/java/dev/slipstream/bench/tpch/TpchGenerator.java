package dev.slipstream.bench.tpch;

import java.io.File;
import java.io.IOException;
import java.io.Reader;
import java.io.Writer;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.math.BigDecimal;
import java.net.MalformedURLException;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Generates the eight TPC-H tables with {@code io.trino.tpch:tpch:1.2} and stores them as
 * Parquet under {@code <dataDir>/sf<scale>/<table>}, reused by later runs (a marker file records
 * the generator, scale factor, schema version and row counts).
 *
 * <p>Generation runs in a {@code local[n]} Spark session in this JVM, before any benchmark
 * cluster starts, with the rows made inside the tasks (one generator part per task). The
 * generator is loaded in its own class loader ({@link TpchRowSource}) from the jars in
 * {@code target/<line>/tpch-lib} (or {@code -Dslipstream.tpch.classpath}), so SPARK_HOME/jars
 * keeps Spark's guava alone.
 *
 * <p>Types: keys BIGINT, integers INT, money and quantities DECIMAL(12,2), dates DATE, text
 * STRING; sums are exact, so every shuffle manager must return identical rows.
 */
public final class TpchGenerator {
  /** Bumped when the stored layout or types change, so old data is regenerated. */
  static final String SCHEMA_VERSION = "1 (keys bigint, money decimal(12,2), dates date)";
  static final String MARKER = "_TPCH_COMPLETE";
  public static final List<String> TABLES =
      List.of("nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem");
  private static final Map<String, Long> ROWS_AT_SF1 = Map.of("nation", 25L, "region", 5L, "part", 200_000L,
      "supplier", 10_000L, "partsupp", 800_000L, "customer", 150_000L, "orders", 1_500_000L, "lineitem", 6_001_215L);

  /** One isolated loader per generator class path in this JVM (a cache; loaders are immutable). */
  private static final Map<String, Method[]> SOURCES = new ConcurrentHashMap<>();

  private TpchGenerator() {}

  /** The folder of one scale factor, e.g. {@code data/tpch/sf0.1}. */
  public static Path folder(Path dataDir, double scaleFactor) {
    return dataDir.resolve("sf" + new BigDecimal(Double.toString(scaleFactor)).stripTrailingZeros().toPlainString());
  }

  /**
   * Returns the folder with all eight tables at this scale factor, generating them first unless a
   * complete earlier generation is there.
   */
  public static Path ensure(Path dataDir, double scaleFactor, int threads, Consumer<String> log) throws IOException {
    Path dir = folder(dataDir, scaleFactor);
    Properties done = readMarker(dir);
    if (done != null && SCHEMA_VERSION.equals(done.getProperty("schema"))) {
      log.accept("TPC-H SF" + scaleFactor + ": reusing " + dir);
      return dir;
    }
    String classPath = generatorClassPath();
    log.accept("TPC-H SF" + scaleFactor + ": generating into " + dir + " (" + threads + " threads) ...");
    Files.createDirectories(dir);
    Files.deleteIfExists(dir.resolve(MARKER));
    Properties marker = new Properties();
    SparkSession spark = SparkSession.builder().appName("tpch-generate").master("local[" + threads + "]")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4").getOrCreate();
    try {
      spark.sparkContext().setLogLevel("WARN");
      JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
      for (String table : TABLES) {
        long t0 = System.nanoTime();
        List<String[]> columns = invoke(classPath, 0, table);
        String[] types = columns.stream().map(c -> c[1]).toArray(String[]::new);
        int parts = parts(table, scaleFactor);
        JavaRDD<Row> rdd = jsc.parallelize(IntStream.rangeClosed(1, parts).boxed().collect(Collectors.toList()), parts)
            .flatMap(new PartRows(classPath, table, scaleFactor, parts, types));
        Dataset<Row> raw = spark.createDataFrame(rdd, rawSchema(columns));
        Dataset<Row> typed = raw.selectExpr(columns.stream()
            .map(c -> c[1].equals("DATE") ? "date_from_unix_date(" + c[0] + ") AS " + c[0] : c[0])
            .toArray(String[]::new));
        String path = dir.resolve(table).toString();
        typed.write().mode(SaveMode.Overwrite).parquet(path);
        long rows = spark.read().parquet(path).count();
        marker.setProperty("rows." + table, Long.toString(rows));
        log.accept(String.format(java.util.Locale.ROOT, "  %-9s %,12d rows in %d files, %.1f s", table, rows, parts,
            (System.nanoTime() - t0) / 1e9));
      }
    } finally {
      spark.stop();
    }
    marker.setProperty("generator", "io.trino.tpch:tpch:1.2");
    marker.setProperty("scaleFactor", Double.toString(scaleFactor));
    marker.setProperty("schema", SCHEMA_VERSION);
    try (Writer w = Files.newBufferedWriter(dir.resolve(MARKER))) {
      marker.store(w, "TPC-H data generated by Slipstream's benchmark runner");
    }
    return dir;
  }

  /** Row counts recorded when the data was generated (table to rows). */
  public static Map<String, Long> rowCounts(Path dir) throws IOException {
    Properties p = readMarker(dir);
    Map<String, Long> out = new LinkedHashMap<>();
    for (String t : TABLES) {
      out.put(t, p == null ? -1L : Long.parseLong(p.getProperty("rows." + t, "-1")));
    }
    return out;
  }

  private static Properties readMarker(Path dir) throws IOException {
    Path f = dir.resolve(MARKER);
    if (!Files.isRegularFile(f)) {
      return null;
    }
    Properties p = new Properties();
    try (Reader r = Files.newBufferedReader(f)) {
      p.load(r);
    }
    return p;
  }

  /** Generator parts (= Parquet files) per table: at least 4 so every executor scans, about 750k rows each. */
  static int parts(String table, double sf) {
    if (table.equals("nation") || table.equals("region")) {
      return 1;
    }
    return (int) Math.max(4, Math.ceil(ROWS_AT_SF1.get(table) * sf / 750_000.0));
  }

  private static StructType rawSchema(List<String[]> columns) {
    List<StructField> fields = new ArrayList<>();
    for (String[] c : columns) {
      DataType t = switch (c[1]) {
        case "IDENTIFIER" -> DataTypes.LongType;
        case "INTEGER", "DATE" -> DataTypes.IntegerType;
        case "DOUBLE" -> DataTypes.createDecimalType(12, 2);
        case "VARCHAR" -> DataTypes.StringType;
        default -> throw new IllegalStateException("column " + c[0] + ": unknown generator type " + c[1]);
      };
      fields.add(DataTypes.createStructField(c[0], t, false));
    }
    return DataTypes.createStructType(fields);
  }

  /**
   * The generator's jars: {@code -Dslipstream.tpch.classpath}, else every jar in the
   * {@code tpch-lib} folder next to this module's classes (the build copies tpch and guava there).
   */
  static String generatorClassPath() {
    String prop = System.getProperty("slipstream.tpch.classpath");
    if (prop != null && !prop.isBlank()) {
      return prop;
    }
    Path classes = ownLocation();
    Path lib = classes.getParent().resolve("tpch-lib");
    try (Stream<Path> s = Files.list(lib)) {
      List<String> jars = s.filter(p -> p.toString().endsWith(".jar")).map(Path::toString).sorted()
          .collect(Collectors.toList());
      if (jars.size() < 2) {
        throw new IllegalStateException("expected the tpch and guava jars in " + lib + ", found " + jars);
      }
      return String.join(File.pathSeparator, jars);
    } catch (IOException e) {
      throw new IllegalStateException("TPC-H generator jars not found in " + lib
          + " (build the module with mvn package, or set -Dslipstream.tpch.classpath)", e);
    }
  }

  private static Path ownLocation() {
    try {
      return Path.of(TpchGenerator.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Calls {@link TpchRowSource#columns} (which 0) or {@link TpchRowSource#rows} (which 1) in the isolated loader. */
  @SuppressWarnings("unchecked")
  static <T> T invoke(String classPath, int which, Object... args) {
    Method[] m = SOURCES.computeIfAbsent(classPath, TpchGenerator::load);
    try {
      return (T) m[which].invoke(null, args);
    } catch (InvocationTargetException e) {
      throw new IllegalStateException("TPC-H generator failed: " + e.getCause(), e.getCause());
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }

  private static Method[] load(String classPath) {
    try {
      List<URL> urls = new ArrayList<>();
      for (String p : classPath.split(File.pathSeparator)) {
        urls.add(Path.of(p).toUri().toURL());
      }
      urls.add(ownLocation().toUri().toURL());
      // Parent = platform loader: neither Spark's guava nor anything else of the application leaks in.
      ClassLoader loader = new URLClassLoader("tpch", urls.toArray(URL[]::new), ClassLoader.getPlatformClassLoader());
      Class<?> c = Class.forName(TpchRowSource.class.getName(), true, loader);
      return new Method[] {c.getMethod("columns", String.class),
          c.getMethod("rows", String.class, double.class, int.class, int.class)};
    } catch (MalformedURLException | ReflectiveOperationException e) {
      throw new IllegalStateException("cannot load the TPC-H generator from " + classPath, e);
    }
  }

  /** Task body: the rows of one generator part, as Spark rows of the raw schema. */
  private static final class PartRows implements FlatMapFunction<Integer, Row> {
    private static final long serialVersionUID = 1L;
    private final String classPath;
    private final String table;
    private final double sf;
    private final int parts;
    private final String[] types;

    PartRows(String classPath, String table, double sf, int parts, String[] types) {
      this.classPath = classPath;
      this.table = table;
      this.sf = sf;
      this.parts = parts;
      this.types = Arrays.copyOf(types, types.length);
    }

    @Override
    public Iterator<Row> call(Integer part) {
      Iterator<Object[]> it = invoke(classPath, 1, table, sf, part, parts);
      return new Iterator<>() {
        @Override
        public boolean hasNext() {
          return it.hasNext();
        }

        @Override
        public Row next() {
          Object[] v = it.next();
          for (int i = 0; i < v.length; i++) {
            if (types[i].equals("DOUBLE")) {
              v[i] = BigDecimal.valueOf((Long) v[i], 2);
            }
          }
          return RowFactory.create(v);
        }
      };
    }
  }
}
