package dev.slipstream.rapids

import com.nvidia.spark.rapids.{GpuMetric, GpuPartitioning}

import org.apache.spark.ShuffleDependency
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.plans.logical.Statistics
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.execution.{ShufflePartitionSpec, SparkPlan}
import org.apache.spark.sql.execution.exchange.{ShuffleExchangeLike, ShuffleOrigin}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLShuffleWriteMetricsReporter}
import org.apache.spark.sql.rapids.execution.{GpuShuffleExchangeExecBaseWithMetrics, ShuffledBatchRDD}
import org.apache.spark.sql.vectorized.ColumnarBatch

/**
 * A RAPIDS shuffle exchange whose partitions stay in GPU memory: map tasks split each batch by
 * partition on the GPU with RAPIDS' own partitioner (Spark-compatible `pmod(murmur3)` hashing, range
 * bounds, or one partition) into contiguous tables ([[RapidsDeviceTables]]), Slipstream's GPU path
 * moves them into the reducers' device memory, and reducers get device batches back, which a
 * `GpuCoalesceBatches` concatenates ([[DeviceShuffleOverrides]]).
 *
 * Everything else is RAPIDS' exchange: its metrics, its AQE statistics, its shuffle RDD (so AQE's
 * coalesced, skew-split and local reads work as for RAPIDS' own exchange).
 */
case class SlipstreamGpuShuffleExchangeExec(
    gpuOutputPartitioning: GpuPartitioning,
    child: SparkPlan,
    shuffleOrigin: ShuffleOrigin,
    advisoryPartitionSize: Option[Long])(
    cpuOutputPartitioning: Partitioning)
  extends GpuShuffleExchangeExecBaseWithMetrics(gpuOutputPartitioning, child) with ShuffleExchangeLike {

  override def otherCopyArgs: Seq[AnyRef] = cpuOutputPartitioning :: Nil

  override val outputPartitioning: Partitioning = cpuOutputPartitioning

  override def nodeName: String = "SlipstreamGpuExchange"

  /** Device batches of many map tasks: coalesced on the GPU after the read. */
  override def coalesceAfter: Boolean = true

  def shuffleId: Int = shuffleDependencyColumnar.shuffleId

  override def numMappers: Int = shuffleDependencyColumnar.rdd.getNumPartitions

  override def numPartitions: Int = shuffleDependencyColumnar.partitioner.numPartitions

  @transient
  override lazy val shuffleDependencyColumnar: ShuffleDependency[Int, ColumnarBatch, ColumnarBatch] = {
    // RAPIDS' exchange registers Spark's shuffle write metrics among its additional metrics; the
    // writer reports into those through Spark's write processor, as under RAPIDS' own exchange.
    val names = SQLShuffleWriteMetricsReporter.createShuffleWriteMetrics(sparkContext).keySet
    val writeMetrics: Map[String, SQLMetric] =
      GpuMetric.unwrap(additionalMetrics).filter { case (k, _) => names.contains(k) }
    RapidsDeviceTables.dependency(inputBatchRDD, child.output, gpuOutputPartitioning, allMetrics, writeMetrics)
  }

  override def getShuffleRDD(partitionSpecs: Array[ShufflePartitionSpec]): RDD[_] =
    new ShuffledBatchRDD(shuffleDependencyColumnar, metrics ++ readMetrics, partitionSpecs)

  override def runtimeStatistics: Statistics =
    Statistics(sizeInBytes = metrics("dataSize").value, rowCount = Some(metrics("numOutputRows").value))
}
