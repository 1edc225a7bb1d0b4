package dev.slipstream.bench.tpch;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorAdded;
import org.apache.spark.scheduler.SparkListenerExecutorExcluded;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import scala.Tuple2;

/**
 * The executors a cluster gained, lost or excluded, with the resources Spark gave each and the
 * reasons it gave, one line per event: the runner sets it as {@code spark.extraListeners}, so it
 * sees the executors that register at the cluster's start too, and prints what came after each
 * query. A comparison is only like for like when every cluster kept all its executors.
 *
 * <p>Threading: Spark's listener bus adds events, the runner's thread drains them; both under the
 * class's lock.
 */
public final class ExecutorLog extends SparkListener {
  private static final List<String> EVENTS = new ArrayList<>();

  /** The events since the last call, oldest first. */
  static List<String> drain() {
    synchronized (EVENTS) {
      List<String> out = new ArrayList<>(EVENTS);
      EVENTS.clear();
      return out;
    }
  }

  private static void add(String event) {
    synchronized (EVENTS) {
      EVENTS.add(event);
    }
  }

  @Override
  public void onExecutorAdded(SparkListenerExecutorAdded e) {
    Map<String, String> resources = new TreeMap<>();
    scala.collection.Iterator<Tuple2<String, ResourceInformation>> it = e.executorInfo().resourcesInfo().iterator();
    while (it.hasNext()) {
      Tuple2<String, ResourceInformation> r = it.next();
      resources.put(r._1(), String.join(",", r._2().addresses()));
    }
    add("executor " + e.executorId() + " added on " + e.executorInfo().executorHost() + ", "
        + e.executorInfo().totalCores() + " cores, resources " + resources);
  }

  @Override
  public void onExecutorRemoved(SparkListenerExecutorRemoved e) {
    add("executor " + e.executorId() + " removed: " + e.reason());
  }

  @Override
  public void onExecutorExcluded(SparkListenerExecutorExcluded e) {
    add("executor " + e.executorId() + " excluded after " + e.taskFailures() + " task failures");
  }
}
