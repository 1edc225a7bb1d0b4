package dev.slipstream.bench.tpch;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.TreeMap;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec;
import org.apache.spark.sql.execution.adaptive.QueryStageExec;
import org.apache.spark.sql.execution.exchange.ReusedExchangeExec;
import org.apache.spark.sql.execution.metric.SQLMetric;
import scala.Tuple2;

/**
 * An executed plan's operators with the values of their SQL metrics (the numbers Spark's UI shows
 * per operator), one line each, indented by depth: adaptive execution's final plan, through query
 * stages, reused exchanges and subqueries. Timing metrics are in milliseconds; a metric that stayed
 * at zero is left out.
 */
final class PlanMetrics {
  private PlanMetrics() {}

  static String of(SparkPlan plan) {
    StringBuilder sb = new StringBuilder();
    visit(plan, (p, depth) -> line(p, depth, sb));
    return sb.toString();
  }

  /** What {@link #visit} hands each operator: the operator and its depth. */
  interface Visitor {
    void operator(SparkPlan p, int depth);
  }

  /**
   * Each operator of the executed plan with its depth, parents first: adaptive execution's final
   * plan, through query stages into their plans, then children and subqueries; a reused exchange
   * is an operator of its own, not descended into (its plan is where it was first used).
   */
  static void visit(SparkPlan plan, Visitor v) {
    walk(plan, 0, v);
  }

  private static void walk(SparkPlan p, int depth, Visitor v) {
    if (p instanceof AdaptiveSparkPlanExec a) {
      walk(a.executedPlan(), depth, v);
      return;
    }
    if (p instanceof QueryStageExec q) {
      walk(q.plan(), depth, v);
      return;
    }
    v.operator(p, depth);
    if (p instanceof ReusedExchangeExec) {
      return;
    }
    List<SparkPlan> next = new ArrayList<>();
    scala.collection.Iterator<SparkPlan> cs = p.children().iterator();
    while (cs.hasNext()) {
      next.add(cs.next());
    }
    scala.collection.Iterator<SparkPlan> subs = p.subqueries().iterator();
    while (subs.hasNext()) {
      next.add(subs.next());
    }
    for (SparkPlan c : next) {
      walk(c, depth + 1, v);
    }
  }

  private static void line(SparkPlan p, int depth, StringBuilder sb) {
    sb.append("  ".repeat(depth)).append(p.nodeName());
    if (p instanceof ReusedExchangeExec) {
      sb.append(" (reused)\n");
      return;
    }
    TreeMap<String, String> values = new TreeMap<>();
    scala.collection.Iterator<Tuple2<String, SQLMetric>> it = p.metrics().iterator();
    while (it.hasNext()) {
      Tuple2<String, SQLMetric> m = it.next();
      long v = m._2().value();
      if (v <= 0) {
        continue;
      }
      String type = m._2().metricType();
      values.put(m._1(), switch (type) {
        case "nsTiming" -> String.format(Locale.ROOT, "%.1f ms", v / 1e6);
        case "timing" -> v + " ms";
        case "size" -> String.format(Locale.ROOT, "%.1f MiB", v / 1048576.0);
        default -> Long.toString(v);
      });
    }
    values.forEach((k, v) -> sb.append("  ").append(k).append('=').append(v));
    sb.append('\n');
  }
}
