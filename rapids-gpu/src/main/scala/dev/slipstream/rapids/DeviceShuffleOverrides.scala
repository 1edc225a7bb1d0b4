package dev.slipstream.rapids

import java.util.Locale
import java.util.concurrent.ConcurrentHashMap

import com.nvidia.spark.rapids.{GpuCoalesceBatches, GpuHashPartitioningBase, GpuPartitioning, GpuShuffleCoalesceExec, GpuShuffledSizedHashJoinExec, GpuSinglePartitioning, RapidsConf, TargetSize}
import com.nvidia.spark.rapids.shims.GpuRangePartitioning
import dev.slipstream.spark.SlipstreamShuffleManager
import dev.slipstream.spark.gpu.{GpuConf, GpuPartitioner}

import org.apache.spark.SparkEnv
import org.apache.spark.internal.Logging
import org.apache.spark.rapids.shims.GpuShuffleExchangeExec
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.adaptive.ShuffleQueryStageExec
import org.apache.spark.sql.execution.exchange.ReusedExchangeExec
import org.apache.spark.sql.rapids.execution.{GpuCustomShuffleReaderExec, GpuShuffleExchangeExecBase}

/**
 * Rewrites a plan that RAPIDS has finished so that its shuffles stay on the GPU through Slipstream:
 *
 *  - each `GpuShuffleExchangeExec` that Slipstream can serve becomes a
 *    [[SlipstreamGpuShuffleExchangeExec]] (same partitioning, same child);
 *  - RAPIDS follows every shuffle read with a `GpuShuffleCoalesceExec`, which concatenates
 *    host-serialized tables before copying them to the GPU; above a read of a Slipstream exchange
 *    (the exchange itself, its AQE query stage, a reused exchange, or RAPIDS' AQE shuffle reader)
 *    it becomes a `GpuCoalesceBatches` to the same target size, which concatenates device batches;
 *  - RAPIDS' sized shuffled hash joins read their shuffles themselves and are told whether those
 *    are host-serialized (`isGpuShuffle`); a join over Slipstream exchanges is told they are not,
 *    and its inputs are coalesced on the GPU as RAPIDS does for its own GPU shuffle.
 *
 * An exchange Slipstream cannot serve stays RAPIDS' exchange (over Slipstream's host path), with one
 * log line per reason. `spark.slipstream.rapids.shuffle` chooses: `device` (the default) or `host`
 * (every exchange stays RAPIDS'); `spark.slipstream.rapids.compression` (`none` or `lz4`) is checked here too.
 */
object DeviceShuffleOverrides extends Logging {
  private val MODE_KEY = GpuConf.RAPIDS_SHUFFLE.key
  private val told = ConcurrentHashMap.newKeySet[String]()

  def apply(plan: SparkPlan): SparkPlan = {
    val mode = plan.conf.getConfString(MODE_KEY, GpuConf.RAPIDS_SHUFFLE.defaultValue).trim.toLowerCase(Locale.ROOT)
    mode match {
      case "host" => plan
      case "device" => whyNot(plan) match {
        case Some(reason) =>
          if (hasRapidsExchange(plan)) once(s"RAPIDS shuffles stay on Slipstream's host path: $reason")
          plan
        case None =>
          // Read again when each exchange's dependency is made; checked here so a bad value fails the plan.
          RapidsDeviceTables.compression(plan.conf)
          rewrite(plan)
      }
      case other => throw new IllegalArgumentException(
        s"$MODE_KEY is '$other', expected 'device' or 'host'")
    }
  }

  /** Why no exchange of this application can go on the GPU path, if so. */
  private def whyNot(plan: SparkPlan): Option[String] = {
    val env = SparkEnv.get
    if (env == null) {
      return Some("no SparkEnv")
    }
    env.shuffleManager match {
      case m: SlipstreamShuffleManager if m.isFallback =>
        Some("Slipstream's manager is using Spark's sort shuffle for this configuration")
      case _: SlipstreamShuffleManager =>
        val plugins = env.conf.get("spark.plugins", "").split(",").map(_.trim)
        if (!plugins.contains(GpuPluginClass)) {
          Some(s"spark.plugins does not name $GpuPluginClass, so executors have no Slipstream GPU runtime")
        } else {
          None
        }
      case other =>
        Some(s"spark.shuffle.manager is ${other.getClass.getName}, not Slipstream's")
    }
  }

  private val GpuPluginClass = "dev.slipstream.spark.gpu.SlipstreamGpuPlugin"

  private def hasRapidsExchange(plan: SparkPlan): Boolean =
    plan.find(_.isInstanceOf[GpuShuffleExchangeExec]).isDefined

  private def once(message: String): Unit = {
    if (told.size < 256 && told.add(message)) {
      logWarning(message)
    }
  }

  /** Why Slipstream cannot serve this exchange on the GPU, if so. */
  def unservable(e: GpuShuffleExchangeExec): Option[String] = {
    val n = e.gpuOutputPartitioning.numPartitions
    if (n > GpuPartitioner.MAX_PARTITIONS) {
      Some(s"an exchange into $n partitions (the GPU path takes at most ${GpuPartitioner.MAX_PARTITIONS})")
    } else if (e.child.output.isEmpty) {
      Some("an exchange of rows without columns")
    } else {
      e.gpuOutputPartitioning match {
        case _: GpuHashPartitioningBase | _: GpuRangePartitioning | GpuSinglePartitioning => None
        case p => Some(s"an exchange with ${p.getClass.getSimpleName}")
      }
    }
  }

  private def rewrite(plan: SparkPlan): SparkPlan = {
    val swapped = plan.transformUp {
      case e: GpuShuffleExchangeExec =>
        unservable(e) match {
          case Some(reason) =>
            once(s"a RAPIDS shuffle stays on Slipstream's host path: $reason")
            e
          case None => SlipstreamGpuShuffleExchangeExec(e.gpuOutputPartitioning, e.child, e.shuffleOrigin,
            e.advisoryPartitionSize)(e.outputPartitioning)
        }
    }
    val target = new RapidsConf(plan.conf).gpuTargetBatchSizeBytes
    // Top down, so that a GpuCoalesceBatches over a GpuShuffleCoalesceExec keeps its goal and is not doubled.
    swapped.transformDown {
      case GpuCoalesceBatches(GpuShuffleCoalesceExec(c, _), goal) if readsDevice(c) => GpuCoalesceBatches(c, goal)
      case GpuShuffleCoalesceExec(c, t) if readsDevice(c) => GpuCoalesceBatches(c, TargetSize(t))
      case j: GpuShuffledSizedHashJoinExec[_] if !j.isGpuShuffle && j.children.exists(readsDevice) =>
        // The flag says how the join reads every side that is a shuffle read: a side read from RAPIDS'
        // host-serialized exchange cannot be read as device batches. Both sides of a shuffled join
        // have the same partitioning, so both are served or neither is; a side that is no shuffle
        // read (a join below, already partitioned) yields device batches either way.
        j.children.find(readsHost).foreach { c =>
          throw new IllegalStateException(s"a shuffled hash join reads one side from Slipstream's GPU path and " +
            s"the other from RAPIDS' host-serialized exchange (${c.simpleString(2)}): ${j.simpleString(2)}")
        }
        val coalesced = j.children.map {
          case c if readsDevice(c) && !c.isInstanceOf[GpuCoalesceBatches] => GpuCoalesceBatches(c, TargetSize(target))
          case c => c
        }
        gpuShuffleJoin(j, coalesced)
    }
  }

  /** `j` told its shuffles are on the GPU, over `children`. */
  private def gpuShuffleJoin(j: GpuShuffledSizedHashJoinExec[_], children: Seq[SparkPlan]): SparkPlan = {
    val names = j.productElementNames.toIndexedSeq
    val at = names.indexOf("isGpuShuffle")
    if (at < 0) {
      throw new IllegalStateException(s"${j.getClass.getName} has no isGpuShuffle field: fields ${names.mkString(", ")}")
    }
    val args = j.productIterator.toArray.map(_.asInstanceOf[AnyRef])
    args(at) = java.lang.Boolean.TRUE
    j.makeCopy(args).withNewChildren(children)
  }

  /** True when `plan` reads a RAPIDS exchange of host-serialized tables (directly or through AQE's wrappers). */
  private def readsHost(plan: SparkPlan): Boolean = plan match {
    case _: SlipstreamGpuShuffleExchangeExec => false
    case _: GpuShuffleExchangeExecBase => true
    case s: ShuffleQueryStageExec => readsHost(s.plan)
    case r: ReusedExchangeExec => readsHost(r.child)
    case r: GpuCustomShuffleReaderExec => readsHost(r.child)
    case _ => false
  }

  /** True when `plan` yields the batches of a Slipstream GPU exchange. */
  def readsDevice(plan: SparkPlan): Boolean = plan match {
    case _: SlipstreamGpuShuffleExchangeExec => true
    case s: ShuffleQueryStageExec => readsDevice(s.plan)
    case r: ReusedExchangeExec => readsDevice(r.child)
    case r: GpuCustomShuffleReaderExec => readsDevice(r.child)
    case c: GpuCoalesceBatches => readsDevice(c.child)
    case _ => false
  }
}
