package dev.slipstream.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.sql.SparkSession;
import scala.Tuple2;

/**
 * The fixed cost of small shuffles: jobs of N chained tiny shuffles (a reduceByKey of 1,000 keys,
 * N times), and one tiny shuffle read by several jobs, on a local cluster under each shuffle
 * manager in turn (sessions alternate, A B A B: {@code --pairs} pairs). Per job it reports the wall time and where it
 * went: the map stages, the result stage, and the rest (scheduling and the driver).
 *
 * <p>Usage: {@code TinyShuffleBench [--executors 3] [--chains 1,5,20] [--rounds 5] [--readers 4]
 * [--pairs 2] [--managers sort,slipstream]}. Prints a table per manager and chain length.
 */
public final class TinyShuffleBench {
  private TinyShuffleBench() {}

  /** Wall time of one job and of its stages, in milliseconds. */
  record JobTime(long wallMs, long mapStagesMs, long resultStageMs) {
    long restMs() {
      return wallMs - mapStagesMs - resultStageMs;
    }
  }

  /** Records each job's wall time and its stages' run times (submission to completion). */
  private static final class Timings extends SparkListener {
    final Map<Integer, Long> jobStart = new ConcurrentHashMap<>();
    final Map<Integer, int[]> jobStages = new ConcurrentHashMap<>();
    final Map<Integer, Long> stageMs = new ConcurrentHashMap<>();
    final Map<Integer, JobTime> done = new ConcurrentHashMap<>();

    @Override
    public void onJobStart(SparkListenerJobStart e) {
      jobStart.put(e.jobId(), e.time());
      int[] ids = new int[e.stageInfos().size()];
      for (int i = 0; i < ids.length; i++) {
        ids[i] = e.stageInfos().apply(i).stageId();
      }
      jobStages.put(e.jobId(), ids);
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
      int[] stages = jobStages.get(e.jobId());
      int last = Arrays.stream(stages).max().orElse(-1); // the result stage has the highest id
      long map = 0;
      for (int s : stages) {
        if (s != last) {
          map += stageMs.getOrDefault(s, 0L); // skipped stages never ran: 0
        }
      }
      done.put(e.jobId(), new JobTime(e.time() - jobStart.get(e.jobId()), map, stageMs.getOrDefault(last, 0L)));
    }
  }

  public static void main(String[] args) throws Exception {
    int executors = 3;
    int rounds = 5;
    int readers = 4;
    int pairs = 2;
    int[] chains = {1, 5, 20};
    List<String> managers = List.of("sort", "slipstream");
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--executors" -> executors = Integer.parseInt(args[++i]);
        case "--rounds" -> rounds = Integer.parseInt(args[++i]);
        case "--readers" -> readers = Integer.parseInt(args[++i]);
        case "--pairs" -> pairs = Integer.parseInt(args[++i]);
        case "--chains" -> chains = Arrays.stream(args[++i].split(",")).mapToInt(Integer::parseInt).toArray();
        case "--managers" -> managers = List.of(args[++i].split(","));
        default -> throw new IllegalArgumentException("unknown option " + args[i] + "; expected --executors N,"
            + " --rounds N, --readers N, --pairs N, --chains a,b,c, --managers sort,slipstream");
      }
    }
    // manager -> case -> every job's times over all sessions
    Map<String, Map<String, List<JobTime>>> all = new LinkedHashMap<>();
    for (int s = 0; s < pairs; s++) {
      for (String m : managers) {
        String cls = switch (m) {
          case "sort" -> LocalCluster.SORT;
          case "slipstream" -> LocalCluster.SLIPSTREAM;
          default -> throw new IllegalArgumentException("--managers: got '" + m + "', expected sort or slipstream");
        };
        session(m, cls, executors, chains, rounds, readers, all.computeIfAbsent(m, k -> new LinkedHashMap<>()));
      }
    }
    System.out.println();
    System.out.println("Tiny shuffles: " + executors + " executors of 1 core, local-cluster, " + pairs
        + " alternating pairs of sessions (one per manager), " + rounds + " jobs per case per session after 2 untimed;"
        + " medians in ms (wall = map stages + result stage + rest)");
    System.out.println(String.format(Locale.ROOT, "%-22s %-11s %8s %8s %8s %8s %7s", "case", "manager", "wall",
        "map", "result", "rest", "ratio"));
    for (String c : all.get(managers.get(0)).keySet()) {
      double base = median(all.get(managers.get(0)).get(c), JobTime::wallMs);
      for (String m : managers) {
        List<JobTime> t = all.get(m).get(c);
        System.out.println(String.format(Locale.ROOT, "%-22s %-11s %8.1f %8.1f %8.1f %8.1f %7.2f", c, m,
            median(t, JobTime::wallMs), median(t, JobTime::mapStagesMs), median(t, JobTime::resultStageMs),
            median(t, JobTime::restMs), median(t, JobTime::wallMs) / base));
      }
    }
  }

  private static void session(String name, String manager, int executors, int[] chains, int rounds, int readers,
                              Map<String, List<JobTime>> out) {
    SparkSession spark = LocalCluster.start(LocalCluster.builder("tiny-shuffles-" + name, manager, executors)
        .config("spark.slipstream.transport", "tcp"), executors);
    try {
      Timings timings = new Timings();
      spark.sparkContext().addSparkListener(timings);
      JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
      List<Integer> keys = new ArrayList<>();
      for (int i = 0; i < 1000; i++) {
        keys.add(i);
      }
      for (int n : chains) {
        for (int r = -2; r < rounds; r++) {
          JavaPairRDD<Integer, Long> rdd = sc.parallelize(keys, executors).mapToPair(k -> new Tuple2<>(k, 1L));
          for (int i = 0; i < n; i++) {
            rdd = rdd.reduceByKey(Long::sum, executors).mapToPair(t -> new Tuple2<>((t._1() * 7 + 1) % 1000, t._2()));
          }
          JavaPairRDD<Integer, Long> chain = rdd;
          int length = n;
          JobTime t = timed(sc, timings, () -> {
            if (chain.count() == 0) {
              throw new IllegalStateException("chain of " + length + " shuffles returned no rows");
            }
          });
          if (r >= 0) {
            out.computeIfAbsent(n + " chained", k -> new ArrayList<>()).add(t);
          }
        }
      }
      for (int r = -2; r < rounds; r++) {
        JavaPairRDD<Integer, Long> shared = sc.parallelize(keys, executors).mapToPair(k -> new Tuple2<>(k % 100, 1L))
            .reduceByKey(Long::sum, executors);
        for (int j = 0; j < readers; j++) {
          JobTime t = timed(sc, timings, shared::count);
          if (r >= 0) {
            out.computeIfAbsent(j == 0 ? "read by " + readers + ": first" : "read by " + readers + ": later",
                k -> new ArrayList<>()).add(t);
          }
        }
      }
    } finally {
      spark.stop();
    }
  }

  private static int jobs;

  /** Runs {@code action} as one job and returns its times (the listener bus delivers its end shortly after). */
  private static JobTime timed(JavaSparkContext sc, Timings timings, Runnable action) {
    String group = "tiny-" + (++jobs);
    sc.setJobGroup(group, group, false);
    action.run();
    int[] ids = sc.statusTracker().getJobIdsForGroup(group);
    if (ids.length != 1) {
      throw new IllegalStateException(group + " ran " + ids.length + " jobs, expected 1");
    }
    int id = ids[0];
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (!timings.done.containsKey(id)) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("no end event for job " + id + " within 10 s");
      }
      Thread.onSpinWait();
    }
    return timings.done.get(id);
  }

  private static double median(List<JobTime> t, java.util.function.ToLongFunction<JobTime> f) {
    long[] v = t.stream().mapToLong(f).sorted().toArray();
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2.0;
  }
}
