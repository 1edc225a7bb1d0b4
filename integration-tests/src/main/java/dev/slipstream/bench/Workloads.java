package dev.slipstream.bench;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.StreamSupport;
import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import scala.Tuple2;

/**
 * The shuffle workloads the integration suite runs under both shuffle managers. Each returns
 * its result as strings: sorted where the operation promises no order, as produced where it
 * does (sortByKey), so two runs compare row for row.
 */
public final class Workloads implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Name to workload, in run order. */
  public static Map<String, Function<SparkSession, List<String>>> all() {
    Map<String, Function<SparkSession, List<String>>> w = new LinkedHashMap<>();
    w.put("groupByKey", Workloads::groupByKey);
    w.put("reduceByKey", Workloads::reduceByKey);
    w.put("aggregateByKey", Workloads::aggregateByKey);
    w.put("join", Workloads::join);
    w.put("cogroup", Workloads::cogroup);
    w.put("sortByKeyAscending", s -> sortByKey(s, true));
    w.put("sortByKeyDescending", s -> sortByKey(s, false));
    w.put("repartition", Workloads::repartition);
    w.put("distinct", Workloads::distinct);
    w.put("emptyPartitions", Workloads::emptyPartitions);
    w.put("skewedPartition", Workloads::skewed);
    w.put("recordsLargerThanALandingBuffer", Workloads::largeRecords);
    w.put("twoThousandReducePartitions", Workloads::manyPartitions);
    w.put("sqlJoinAndAggregationWithAqe", Workloads::sqlWithAqe);
    w.put("sqlRowsNotCopiedAboveDirectPartitions", Workloads::sqlManyPartitions);
    return w;
  }

  private static JavaSparkContext jsc(SparkSession s) {
    return JavaSparkContext.fromSparkContext(s.sparkContext());
  }

  private static JavaPairRDD<Integer, Long> pairs(SparkSession s, int n, int keys, int slices) {
    List<Integer> seeds = new ArrayList<>();
    for (int i = 0; i < slices; i++) {
      seeds.add(i);
    }
    return jsc(s).parallelize(seeds, slices).flatMapToPair(slice -> {
      List<Tuple2<Integer, Long>> out = new ArrayList<>();
      for (int i = slice; i < n; i += slices) {
        out.add(new Tuple2<>((int) ((i * 2654435761L) % keys), (long) i));
      }
      return out.iterator();
    });
  }

  private static <T> List<String> sorted(List<T> rows) {
    return rows.stream().map(String::valueOf).sorted().collect(Collectors.toList());
  }

  public static List<String> groupByKey(SparkSession s) {
    return sorted(pairs(s, 200_000, 5_000, 4).groupByKey(6).mapValues(vs -> {
      List<Long> l = new ArrayList<>();
      vs.forEach(l::add);
      Collections.sort(l);
      return l.size() + ":" + l.stream().mapToLong(Long::longValue).sum() + ":" + l.get(0);
    }).collect());
  }

  public static List<String> reduceByKey(SparkSession s) {
    return sorted(pairs(s, 300_000, 10_000, 4).reduceByKey(Long::sum, 5).collect());
  }

  public static List<String> aggregateByKey(SparkSession s) {
    return sorted(pairs(s, 200_000, 3_000, 4).aggregateByKey(new long[] {0, Long.MAX_VALUE, 0}, 7,
        (acc, v) -> new long[] {acc[0] + v, Math.min(acc[1], v), acc[2] + 1},
        (a, b) -> new long[] {a[0] + b[0], Math.min(a[1], b[1]), a[2] + b[2]})
        .mapValues(Arrays::toString).collect());
  }

  public static List<String> join(SparkSession s) {
    JavaPairRDD<Integer, Long> left = pairs(s, 100_000, 20_000, 4);
    JavaPairRDD<Integer, String> right = pairs(s, 30_000, 20_000, 3).mapValues(v -> "r" + (v % 97));
    return sorted(left.join(right, 6).collect());
  }

  public static List<String> cogroup(SparkSession s) {
    JavaPairRDD<Integer, Long> a = pairs(s, 50_000, 4_000, 4);
    JavaPairRDD<Integer, Long> b = pairs(s, 20_000, 6_000, 2);
    return sorted(a.cogroup(b, 5).mapValues(t -> {
      List<Long> x = new ArrayList<>();
      t._1().forEach(x::add);
      List<Long> y = new ArrayList<>();
      t._2().forEach(y::add);
      Collections.sort(x);
      Collections.sort(y);
      return x + "|" + y;
    }).collect());
  }

  public static List<String> sortByKey(SparkSession s, boolean ascending) {
    List<Tuple2<Integer, Long>> rows = pairs(s, 100_000, 1_000_000, 4)
        .mapToPair(t -> new Tuple2<>(t._1(), t._2())).sortByKey(ascending, 5).collect();
    // Order of keys is promised; order of equal keys is not, so sort values within a key run.
    List<String> out = new ArrayList<>();
    int i = 0;
    while (i < rows.size()) {
      int j = i;
      List<Long> vals = new ArrayList<>();
      while (j < rows.size() && rows.get(j)._1().equals(rows.get(i)._1())) {
        vals.add(rows.get(j)._2());
        j++;
      }
      Collections.sort(vals);
      out.add(rows.get(i)._1() + "=" + vals);
      i = j;
    }
    return out;
  }

  public static List<String> repartition(SparkSession s) {
    JavaRDD<Long> r = pairs(s, 100_000, 100, 3).values().repartition(7);
    List<String> perPartitionSizes = new ArrayList<>();
    r.glom().collect().forEach(p -> perPartitionSizes.add("n"));
    List<String> out = sorted(r.collect());
    out.add("partitions=" + perPartitionSizes.size());
    return out;
  }

  public static List<String> distinct(SparkSession s) {
    return sorted(pairs(s, 200_000, 7_777, 4).keys().distinct(6).collect());
  }

  public static List<String> emptyPartitions(SparkSession s) {
    // 3 keys into 16 partitions: most reduce partitions are empty, and so are two map slices.
    List<Integer> data = new ArrayList<>();
    for (int i = 0; i < 1000; i++) {
      data.add(i);
    }
    JavaPairRDD<Integer, Integer> p = jsc(s).parallelize(data, 6).filter(i -> i < 600)
        .mapToPair(i -> new Tuple2<>(i % 3, 1));
    List<String> out = sorted(p.reduceByKey(Integer::sum, 16).collect());
    out.add("empty-input=" + jsc(s).<Integer>emptyRDD().mapToPair(i -> new Tuple2<>(i, i)).groupByKey(4).count());
    return out;
  }

  public static List<String> skewed(SparkSession s) {
    // 90% of the records go to key 0, so one reduce partition holds 90% of the data.
    JavaPairRDD<Integer, Long> p = pairs(s, 400_000, 1_000, 4)
        .mapToPair(t -> new Tuple2<>(t._2() % 10 == 0 ? t._1() : 0, t._2()));
    return sorted(p.partitionBy(new HashPartitioner(8)).mapPartitions(it -> {
      Map<Integer, long[]> m = new java.util.TreeMap<>();
      it.forEachRemaining(t -> {
        long[] a = m.computeIfAbsent(t._1(), k -> new long[2]);
        a[0]++;
        a[1] += t._2();
      });
      List<String> out = new ArrayList<>();
      m.forEach((k, v) -> out.add(k + ":" + v[0] + ":" + v[1]));
      return out.iterator();
    }).collect());
  }

  public static List<String> largeRecords(SparkSession s) {
    // Each value is ~1.5 MB: bigger than one landing request (maxRequestBytes in the suite).
    List<Integer> ids = Arrays.asList(0, 1, 2, 3, 4, 5, 6, 7);
    JavaPairRDD<Integer, byte[]> big = jsc(s).parallelize(ids, 4).mapToPair(i -> {
      byte[] b = new byte[1_500_000 + i * 1000];
      new java.util.Random(i).nextBytes(b);
      return new Tuple2<>(i % 3, b);
    });
    return sorted(big.groupByKey(3).mapValues(vs -> StreamSupport.stream(vs.spliterator(), false)
        .map(b -> b.length + "#" + Arrays.hashCode(b)).sorted().collect(Collectors.joining(","))).collect());
  }

  public static List<String> manyPartitions(SparkSession s) {
    return sorted(pairs(s, 100_000, 50_000, 4).reduceByKey(Long::sum, 2000)
        .mapPartitionsWithIndex((idx, it) -> {
          long n = 0;
          long sum = 0;
          while (it.hasNext()) {
            Tuple2<Integer, Long> t = it.next();
            n++;
            sum += t._2() ^ t._1();
          }
          return Collections.singletonList(idx + ":" + n + ":" + sum).iterator();
        }, true).collect());
  }

  public static List<String> sqlWithAqe(SparkSession s) {
    s.conf().set("spark.sql.adaptive.enabled", "true");
    s.conf().set("spark.sql.autoBroadcastJoinThreshold", "-1");
    s.conf().set("spark.sql.shuffle.partitions", "12");
    Dataset<Row> facts = s.range(0, 300_000, 1, 4).selectExpr("id", "id % 1000 as k", "cast(id * 7 % 101 as double) as v");
    Dataset<Row> dims = s.range(0, 1000, 1, 2).selectExpr("id as k", "concat('name', id % 37) as name");
    facts.createOrReplaceTempView("facts");
    dims.createOrReplaceTempView("dims");
    List<String> out = new ArrayList<>();
    s.sql("select d.name, count(*) c, sum(f.v) s, max(f.id) m from facts f join dims d on f.k = d.k group by d.name")
        .collectAsList().forEach(r -> out.add("agg " + r.mkString(",")));
    s.sql("select k, count(distinct v) from facts group by k having count(*) > 250")
        .collectAsList().forEach(r -> out.add("distinct " + r.mkString(",")));
    s.sql("select f.k, d.name, f.v from facts f join dims d on f.k = d.k where f.id % 997 = 0")
        .collectAsList().forEach(r -> out.add("join " + r.mkString(",")));
    Collections.sort(out);
    return out;
  }

  /**
   * Spark SQL hands a sort-based shuffle manager its reused rows without copying them. With 300
   * partitions (above the direct writer's 200) Slipstream's serialized-sort writer must serialize
   * each row before the next one overwrites it: a writer that kept row objects would return the
   * last row of each batch many times over. Variable-length strings make every row different.
   */
  public static List<String> sqlManyPartitions(SparkSession s) {
    String[] keys = {"spark.sql.adaptive.enabled", "spark.sql.autoBroadcastJoinThreshold", "spark.sql.shuffle.partitions"};
    String[] before = new String[keys.length];
    for (int i = 0; i < keys.length; i++) {
      before[i] = s.conf().getOption(keys[i]).getOrElse(() -> null);
    }
    s.conf().set(keys[0], "false");
    s.conf().set(keys[1], "-1");
    s.conf().set(keys[2], "300");
    try {
      Dataset<Row> rows = s.range(0, 200_000, 1, 4)
          .selectExpr("id", "id % 5003 as k", "repeat(concat('r', cast(id as string)), cast(id % 4 + 1 as int)) as text");
      Dataset<Row> dims = s.range(0, 5003, 1, 2).selectExpr("id as k", "concat('dim-', id * 31 % 977) as name");
      rows.createOrReplaceTempView("rows300");
      dims.createOrReplaceTempView("dims300");
      List<String> out = new ArrayList<>();
      s.sql("select d.name, count(*), sum(length(r.text)), max(r.text) from rows300 r join dims300 d on r.k = d.k"
          + " group by d.name").collectAsList().forEach(r -> out.add("agg " + r.mkString(",")));
      s.sql("select r.id, r.text, d.name from rows300 r join dims300 d on r.k = d.k where r.id % 1009 = 0")
          .collectAsList().forEach(r -> out.add("join " + r.mkString(",")));
      rows.repartition(300, rows.col("text")).selectExpr("spark_partition_id() as p", "text").groupBy("p")
          .agg(org.apache.spark.sql.functions.count("text"), org.apache.spark.sql.functions.max("text"))
          .collectAsList().forEach(r -> out.add("part " + r.mkString(",")));
      Collections.sort(out);
      return out;
    } finally {
      for (int i = 0; i < keys.length; i++) {
        if (before[i] == null) {
          s.conf().unset(keys[i]);
        } else {
          s.conf().set(keys[i], before[i]);
        }
      }
    }
  }

  /**
   * A shuffle whose eight map tasks take at least 300 ms each, so that two free single-core
   * executors both run some and every reduce task reads blocks across the transport. Returns
   * the number of keys (997).
   */
  public static long spreadShuffle(SparkSession s) {
    List<Integer> slices = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      slices.add(i);
    }
    return jsc(s).parallelize(slices, 8).flatMapToPair(slice -> {
      Thread.sleep(300);
      List<Tuple2<Integer, Long>> out = new ArrayList<>();
      for (int i = slice; i < 80_000; i += 8) {
        out.add(new Tuple2<>(i % 997, (long) i));
      }
      return out.iterator();
    }).reduceByKey(Long::sum, 4).count();
  }
}
