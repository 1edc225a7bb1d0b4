package dev.slipstream.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.SparkSession;
import scala.Tuple2;

/**
 * The fixed cost of small shuffles, under each shuffle manager in turn on a local cluster (one
 * Spark application per manager, alternating A B A B: {@code --pairs} pairs). Each application runs
 * these cases, each {@code 2 + rounds} times: the first run is reported as the case's cold run
 * (the first time the application runs that code), the second is untimed, the others are the warm
 * runs.
 *
 * <ul>
 *   <li>{@code N chained}: one job of N chained {@code reduceByKey} shuffles over 1,000 keys, each
 *       followed by a key remap, then {@code count()} (N from {@code --chains});
 *   <li>{@code rbk-gbk-sbk}: {@code reduceByKey}, {@code groupByKey} and {@code sortByKey} chained over
 *       1,000 keys ({@code sortByKey} adds its sampling job);
 *   <li>{@code sort+zipWithIndex}: 300,000 records sorted by key, then {@code zipWithIndex}, whose
 *       size job and count job read the sorted shuffle twice;
 *   <li>{@code subtractByKey}: 1,000 keys minus 500 (a shuffle of two inputs);
 *   <li>{@code coalesce 40->7}: 40 uneven partitions (partition i holds 200 i records) repartitioned
 *       into 7 with {@code coalesce(7, true)};
 *   <li>{@code read by K}: one {@code reduceByKey} output of 100 keys counted by K jobs
 *       ({@code --readers}); the first job runs the map stage and reads, the later ones only read.
 * </ul>
 *
 * <p>A {@code SparkListener} splits each case's wall time (driver clock around its jobs) into the
 * map stages, the result stages (submission to completion, summed over its jobs) and the rest
 * (scheduling and driver work between stages), and sums over the tasks the fetch wait (time a
 * task was blocked on shuffle blocks) and the run time of the map tasks and of the result tasks
 * (executorRunTime: the task's own time, without its scheduling, launch and result handling). The
 * cold table also has each application's start (the session built until every executor registered)
 * and stop ({@code SparkSession.stop()}).
 *
 * <p>Usage: {@code TinyShuffleBench [--executors 3] [--chains 1,5,20] [--rounds 5] [--readers 4]
 * [--pairs 2] [--managers sort,slipstream] [--cases name,...] [--conf key=value ...]}; {@code --conf} sets a
 * Spark setting in every application; {@code --cases} takes the case names
 * above with N and K left out ({@code chained}, {@code rbk-gbk-sbk}, {@code zip}, {@code subtract},
 * {@code coalesce}, {@code read}). Prints a table of warm medians and one of cold runs.
 */
public final class TinyShuffleBench {
  private TinyShuffleBench() {}

  /** Wall time of one case's jobs and where it went, in milliseconds. */
  record CaseTime(long wallMs, long mapStagesMs, long resultStagesMs, long fetchWaitMs, long mapTasksMs,
                  long resultTasksMs) {
    long restMs() {
      return wallMs - mapStagesMs - resultStagesMs;
    }
  }

  /** Records each job's stages, each stage's run time (submission to completion) and its tasks' fetch wait. */
  private static final class Timings extends SparkListener {
    final Map<Integer, int[]> jobStages = new ConcurrentHashMap<>();
    final Map<Integer, Long> stageMs = new ConcurrentHashMap<>();
    final Map<Integer, Long> fetchWaitMs = new ConcurrentHashMap<>();
    final Map<Integer, Long> taskRunMs = new ConcurrentHashMap<>();
    final Set<Integer> ended = ConcurrentHashMap.newKeySet();

    @Override
    public void onJobStart(SparkListenerJobStart e) {
      int[] ids = new int[e.stageInfos().size()];
      for (int i = 0; i < ids.length; i++) {
        ids[i] = e.stageInfos().apply(i).stageId();
      }
      jobStages.put(e.jobId(), ids);
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd e) {
      if (e.taskMetrics() != null) {
        fetchWaitMs.merge(e.stageId(), e.taskMetrics().shuffleReadMetrics().fetchWaitTime(), Long::sum);
        taskRunMs.merge(e.stageId(), e.taskMetrics().executorRunTime(), Long::sum);
      }
    }

    @Override
    public void onStageCompleted(SparkListenerStageCompleted e) {
      var info = e.stageInfo();
      if (info.submissionTime().isDefined() && info.completionTime().isDefined()) {
        stageMs.put(info.stageId(), (Long) info.completionTime().get() - (Long) info.submissionTime().get());
      }
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd e) {
      ended.add(e.jobId());
    }
  }

  /** One case: a name, and what it runs (returning a row count, which must not be 0). */
  private record Case(String name, String family, java.util.function.LongSupplier run) {}

  public static void main(String[] args) throws Exception {
    int executors = 3;
    int rounds = 5;
    int readers = 4;
    int pairs = 2;
    int[] chains = {1, 5, 20};
    List<String> managers = List.of("sort", "slipstream");
    Set<String> families = new LinkedHashSet<>(FAMILIES);
    Map<String, String> extra = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--executors" -> executors = Integer.parseInt(args[++i]);
        case "--rounds" -> rounds = Integer.parseInt(args[++i]);
        case "--readers" -> readers = Integer.parseInt(args[++i]);
        case "--pairs" -> pairs = Integer.parseInt(args[++i]);
        case "--chains" -> chains = Arrays.stream(args[++i].split(",")).mapToInt(Integer::parseInt).toArray();
        case "--managers" -> managers = List.of(args[++i].split(","));
        case "--conf" -> {
          String[] kv = args[++i].split("=", 2);
          if (kv.length != 2) {
            throw new IllegalArgumentException("--conf: got '" + args[i] + "', expected key=value");
          }
          extra.put(kv[0], kv[1]);
        }
        case "--cases" -> {
          families = new LinkedHashSet<>(List.of(args[++i].split(",")));
          for (String f : families) {
            if (!FAMILIES.contains(f)) {
              throw new IllegalArgumentException("--cases: got '" + f + "', expected some of " + FAMILIES);
            }
          }
        }
        default -> throw new IllegalArgumentException("unknown option " + args[i] + "; expected --executors N,"
            + " --rounds N, --readers N, --pairs N, --chains a,b,c, --managers sort,slipstream, --cases a,b,"
            + " --conf key=value");
      }
    }
    // manager -> case -> every warm run's times over all applications; and the cold runs
    Map<String, Map<String, List<CaseTime>>> warm = new LinkedHashMap<>();
    Map<String, Map<String, List<CaseTime>>> cold = new LinkedHashMap<>();
    for (int s = 0; s < pairs; s++) {
      for (String m : managers) {
        String cls = switch (m) {
          case "sort" -> LocalCluster.SORT;
          case "slipstream" -> LocalCluster.SLIPSTREAM;
          default -> throw new IllegalArgumentException("--managers: got '" + m + "', expected sort or slipstream");
        };
        session(m, cls, executors, chains, rounds, readers, families, extra,
            warm.computeIfAbsent(m, k -> new LinkedHashMap<>()), cold.computeIfAbsent(m, k -> new LinkedHashMap<>()));
      }
    }
    System.out.println();
    System.out.println("Tiny shuffles: " + executors + " executors of 1 core, local-cluster, " + pairs
        + " alternating pairs of applications (one per manager); per case and application: a cold run, an untimed one, " + rounds
        + " warm; ms (wall = map stages + result stages + rest; fetch wait summed over reduce tasks)");
    table("warm runs, medians", warm, managers);
    table("cold runs (first run of the case in its application), medians over applications", cold, managers);
  }

  static final List<String> FAMILIES = List.of("chained", "rbk-gbk-sbk", "zip", "subtract", "coalesce", "read");

  private static void table(String title, Map<String, Map<String, List<CaseTime>>> all, List<String> managers) {
    System.out.println();
    System.out.println(title);
    System.out.println(String.format(Locale.ROOT, "%-22s %-11s %8s %8s %8s %8s %8s %8s %8s %7s", "case", "manager",
        "wall", "map", "result", "rest", "fetchwt", "maptask", "redtask", "ratio"));
    for (String c : all.get(managers.get(0)).keySet()) {
      double base = median(all.get(managers.get(0)).get(c), CaseTime::wallMs);
      for (String m : managers) {
        List<CaseTime> t = all.get(m).get(c);
        System.out.println(String.format(Locale.ROOT, "%-22s %-11s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %7.2f", c,
            m, median(t, CaseTime::wallMs), median(t, CaseTime::mapStagesMs), median(t, CaseTime::resultStagesMs),
            median(t, CaseTime::restMs), median(t, CaseTime::fetchWaitMs), median(t, CaseTime::mapTasksMs),
            median(t, CaseTime::resultTasksMs), median(t, CaseTime::wallMs) / base));
      }
    }
  }

  private static List<Case> cases(JavaSparkContext sc, int executors, int[] chains, Set<String> families) {
    List<Integer> keys = range(1000);
    List<Case> out = new ArrayList<>();
    if (families.contains("chained")) {
      for (int n : chains) {
        int length = n;
        out.add(new Case(n + " chained", "chained", () -> {
          JavaPairRDD<Integer, Long> rdd = sc.parallelize(keys, executors).mapToPair(k -> new Tuple2<>(k, 1L));
          for (int i = 0; i < length; i++) {
            rdd = rdd.reduceByKey(Long::sum, executors).mapToPair(t -> new Tuple2<>((t._1() * 7 + 1) % 1000, t._2()));
          }
          return rdd.count();
        }));
      }
    }
    if (families.contains("rbk-gbk-sbk")) {
      out.add(new Case("rbk-gbk-sbk", "rbk-gbk-sbk", () -> sc.parallelize(keys, executors)
          .mapToPair(k -> new Tuple2<>(k, 1L)).reduceByKey(Long::sum, executors)
          .mapToPair(t -> new Tuple2<>(t._1() % 100, t._2())).groupByKey(executors)
          .mapToPair(t -> {
            long n = 0;
            for (Long ignored : t._2()) {
              n++;
            }
            return new Tuple2<>(t._1(), n);
          })
          .sortByKey(true, executors).count()));
    }
    if (families.contains("zip")) {
      List<Integer> many = range(300_000);
      out.add(new Case("sort+zipWithIndex", "zip", () -> sc.parallelize(many, executors)
          .mapToPair(k -> new Tuple2<>((k * 7919) % 300_000, k)).sortByKey(true, executors).zipWithIndex().count()));
    }
    if (families.contains("subtract")) {
      List<Integer> half = range(500);
      out.add(new Case("subtractByKey", "subtract", () -> sc.parallelize(keys, executors)
          .mapToPair(k -> new Tuple2<>(k, 1L))
          .subtractByKey(sc.parallelize(half, executors).mapToPair(k -> new Tuple2<>(k, 0L)), executors).count()));
    }
    if (families.contains("coalesce")) {
      List<Integer> uneven = new ArrayList<>();
      for (int p = 0; p < 40; p++) {
        for (int i = 0; i < 200 * p; i++) {
          uneven.add(p); // parallelize slices in order: partition p gets 200 p records of value p
        }
      }
      out.add(new Case("coalesce 40->7", "coalesce", () -> sc.parallelize(uneven, 40).coalesce(7, true).count()));
    }
    return out;
  }

  private static void session(String name, String manager, int executors, int[] chains, int rounds, int readers,
                              Set<String> families, Map<String, String> extra, Map<String, List<CaseTime>> warm,
                              Map<String, List<CaseTime>> cold) {
    SparkSession.Builder b = LocalCluster.builder("tiny-shuffles-" + name, manager, executors)
        .config("spark.slipstream.transport", "tcp");
    extra.forEach(b::config);
    long t0 = System.nanoTime();
    SparkSession spark = LocalCluster.start(b, executors);
    cold.computeIfAbsent("application start", k -> new ArrayList<>()).add(wallOnly(t0));
    try {
      Timings timings = new Timings();
      spark.sparkContext().addSparkListener(timings);
      JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
      for (Case c : cases(sc, executors, chains, families)) {
        for (int r = -2; r < rounds; r++) {
          CaseTime t = timed(sc, timings, () -> {
            if (c.run().getAsLong() == 0) {
              throw new IllegalStateException(c.name() + " returned no rows");
            }
          });
          record(r, c.name(), t, warm, cold);
        }
      }
      if (families.contains("read")) {
        List<Integer> keys = range(1000);
        for (int r = -2; r < rounds; r++) {
          JavaPairRDD<Integer, Long> shared = sc.parallelize(keys, executors).mapToPair(k -> new Tuple2<>(k % 100, 1L))
              .reduceByKey(Long::sum, executors);
          for (int j = 0; j < readers; j++) {
            CaseTime t = timed(sc, timings, shared::count);
            record(r, j == 0 ? "read by " + readers + ": first" : "read by " + readers + ": later", t, warm, cold);
          }
        }
      }
    } finally {
      long t1 = System.nanoTime();
      spark.stop();
      cold.computeIfAbsent("application stop", k -> new ArrayList<>()).add(wallOnly(t1));
    }
  }

  /** The time since {@code t0} as a case's wall time, with nothing else measured. */
  private static CaseTime wallOnly(long t0) {
    return new CaseTime((System.nanoTime() - t0) / 1_000_000, 0, 0, 0, 0, 0);
  }

  private static void record(int round, String name, CaseTime t, Map<String, List<CaseTime>> warm,
                             Map<String, List<CaseTime>> cold) {
    if (round == -2) {
      cold.computeIfAbsent(name, k -> new ArrayList<>()).add(t);
    } else if (round >= 0) {
      warm.computeIfAbsent(name, k -> new ArrayList<>()).add(t);
    }
  }

  private static List<Integer> range(int n) {
    List<Integer> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(i);
    }
    return out;
  }

  private static int groups;

  /** Runs {@code action} (one or more jobs) and returns its times, once the listener bus has delivered every job's end. */
  private static CaseTime timed(JavaSparkContext sc, Timings timings, Runnable action) {
    String group = "tiny-" + (++groups);
    sc.setJobGroup(group, group, false);
    long t0 = System.nanoTime();
    action.run();
    long wallMs = (System.nanoTime() - t0) / 1_000_000;
    int[] ids = sc.statusTracker().getJobIdsForGroup(group);
    if (ids.length == 0) {
      throw new IllegalStateException(group + " ran no job");
    }
    long deadline = System.nanoTime() + 10_000_000_000L;
    for (int id : ids) {
      while (!timings.ended.contains(id)) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("no end event for job " + id + " within 10 s");
        }
        Thread.onSpinWait();
      }
    }
    long map = 0;
    long result = 0;
    long fetchWait = 0;
    long mapTasks = 0;
    long resultTasks = 0;
    for (int id : ids) {
      int[] stages = timings.jobStages.get(id);
      int last = Arrays.stream(stages).max().orElse(-1); // a job's result stage has its highest stage id
      for (int s : stages) {
        long ms = timings.stageMs.getOrDefault(s, 0L); // skipped stages never ran: 0
        long run = timings.taskRunMs.getOrDefault(s, 0L);
        if (s == last) {
          result += ms;
          resultTasks += run;
        } else {
          map += ms;
          mapTasks += run;
        }
        fetchWait += timings.fetchWaitMs.getOrDefault(s, 0L);
      }
    }
    return new CaseTime(wallMs, map, result, fetchWait, mapTasks, resultTasks);
  }

  private static double median(List<CaseTime> t, java.util.function.ToLongFunction<CaseTime> f) {
    long[] v = t.stream().mapToLong(f).sorted().toArray();
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2.0;
  }
}
