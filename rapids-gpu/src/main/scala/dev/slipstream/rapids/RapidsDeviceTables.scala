package dev.slipstream.rapids

import java.nio.ByteBuffer

import ai.rapids.cudf.{ContiguousTable, Cuda, DeviceMemoryBuffer, Table}
import com.nvidia.spark.rapids.{GpuBindReferences, GpuColumnVector, GpuExpression, GpuHashPartitioningBase, GpuMetric, GpuPartitioning, GpuRangePartitioner, GpuSemaphore, GpuSinglePartitioning, GpuSorter, NoopMetric, RapidsConf, SpillPriorities, SpillableColumnarBatch}
import com.nvidia.spark.rapids.Arm.{closeOnExcept, withResource}
import com.nvidia.spark.rapids.RmmRapidsRetryIterator.withRetryNoSplit
import com.nvidia.spark.rapids.shims.GpuRangePartitioning
import dev.slipstream.spark.gpu.{DeviceTableCodec, DeviceTableDependency}
import dev.slipstream.spark.gpu.DeviceTableCodec.{DeviceTable, LandedTable}

import org.apache.spark.{Partitioner, ShuffleDependency, TaskContext}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.execution.metric.SQLMetric
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.rapids.execution.GpuShuffleExchangeExecBase
import org.apache.spark.sql.slipstream.DeviceTablesDependency
import org.apache.spark.sql.types.DataType
import org.apache.spark.sql.vectorized.ColumnarBatch

/**
 * The map and reduce sides of a [[SlipstreamGpuShuffleExchangeExec]] in terms of cudf.
 *
 * Map side: each input batch is partitioned on the GPU by RAPIDS' partitioner, bound as RAPIDS binds
 * it, and cut with `Table.contiguousSplit` into one contiguous table per non-empty partition (one
 * device buffer plus cudf's packed metadata); the records `(partition, DeviceTableValue)` go to
 * Slipstream's device-table writer. Reduce side: [[RapidsTableCodec]] turns groups of landed tables
 * into batches of the exchange's Spark types.
 */
object RapidsDeviceTables {
  def dependency(
      input: RDD[ColumnarBatch],
      output: Seq[Attribute],
      partitioning: GpuPartitioning,
      metrics: Map[String, GpuMetric],
      writeMetrics: Map[String, SQLMetric]): ShuffleDependency[Int, ColumnarBatch, ColumnarBatch] = {
    val types = output.map(_.dataType).toArray
    val n = partitioning.numPartitions
    val bound = bind(input, output, partitioning, metrics)
    val rows = metrics(GpuMetric.NUM_OUTPUT_ROWS)
    val batches = metrics(GpuMetric.NUM_OUTPUT_BATCHES)
    val dataSize = metrics(GpuShuffleExchangeExecBase.METRIC_DATA_SIZE)
    val partitionTime = metrics(GpuShuffleExchangeExecBase.METRIC_SHUFFLE_PARTITION_TIME)
    val tables: RDD[Product2[Int, AnyRef]] = input.mapPartitions { it =>
      it.flatMap { batch =>
        val parts = partitionTime.ns(split(bound, n, batch))
        parts.foreach { case (_, t) =>
          rows += t.rows()
          dataSize += t.bytes()
        }
        batches += parts.length
        parts.iterator
      }
    }
    // The values are DeviceTableValues, which only Slipstream's device-table writer takes; the
    // dependency's value type is the exchange's, as Spark's shuffle RDD expects of the read side.
    val records = tables.asInstanceOf[RDD[Product2[Int, ColumnarBatch]]]
    val codec = new RapidsTableCodec(types, new RapidsConf(SQLConf.get).gpuTargetBatchSizeBytes,
      metrics.getOrElse(GpuShuffleExchangeExecBase.METRIC_SHUFFLE_DESERIALIZATION_TIME, NoopMetric),
      metrics.getOrElse(GpuShuffleExchangeExecBase.METRIC_DATA_READ_SIZE, NoopMetric))
    new DeviceTablesDependency(records, new PartitionIdPassThrough(n), codec,
      ShuffleExchangeExec.createShuffleWriteProcessor(writeMetrics))
  }

  /** RAPIDS' partitioner for `partitioning`, bound to `output` (range bounds are sampled here, on the driver). */
  private def bind(
      input: RDD[ColumnarBatch],
      output: Seq[Attribute],
      partitioning: GpuPartitioning,
      metrics: Map[String, GpuMetric]): GpuExpression = partitioning match {
    case h: GpuHashPartitioningBase => GpuBindReferences.bindReference(h, output, metrics)
    case r: GpuRangePartitioning =>
      val sorter = new GpuSorter(r.gpuOrdering, output, metrics)
      val bounds = GpuRangePartitioner.createRangeBounds(r.numPartitions, sorter, input,
        SQLConf.get.rangeExchangeSampleSizePerPartition)
      new GpuRangePartitioner(bounds, sorter)
    case GpuSinglePartitioning => GpuSinglePartitioning
    case p => throw new IllegalArgumentException(
      s"Slipstream's GPU exchange got ${p.getClass.getName}, expected hash, range or single partitioning")
  }

  /** Partition i's rows start at `starts(i)` of `columns` (closed here): one contiguous table per partition. */
  private def cut(partitioned: (Array[Int], Array[GpuColumnVector])): Array[ContiguousTable] = {
    val (starts, columns) = partitioned
    withResource(columns) { cs =>
      withResource(new Table(cs.map(_.getBase): _*)) { t => t.contiguousSplit(starts.drop(1): _*) }
    }
  }

  /** `batch` (closed here) cut into one contiguous table per non-empty partition. */
  private def split(bound: GpuExpression, n: Int, batch: ColumnarBatch): Array[(Int, DeviceTableValue)] = {
    if (batch.numRows() == 0) {
      batch.close()
      return Array.empty
    }
    val tables: Array[ContiguousTable] = bound match {
      // RAPIDS' range partitioner retries on GPU memory pressure itself; the others run under a retry
      // here, on a spillable copy of the batch, as RAPIDS' own exchange does.
      case r: GpuRangePartitioner => cut(r.computeBoundsAndCloseWithRetry(batch))
      case _ =>
        withRetryNoSplit(SpillableColumnarBatch(batch, SpillPriorities.ACTIVE_ON_DECK_PRIORITY)) { s =>
          val b = s.getColumnarBatch()
          bound match {
            case h: GpuHashPartitioningBase => cut(h.partitionInternalAndClose(b))
            case _ => withResource(b) { _ => withResource(GpuColumnVector.from(b)) { t => t.contiguousSplit() } }
          }
        }
    }
    // Slipstream copies the tables on a stream of its own: the split must be complete first.
    Cuda.DEFAULT_STREAM.sync()
    // A range partitioner has as many partitions as bounds were found plus one, at most n (as
    // Spark's): the tables are partitions 0, 1, ... and the rest of the n are empty.
    closeOnExcept(tables) { _ =>
      if (tables.length > n) {
        throw new IllegalStateException(s"contiguous split into ${tables.length} tables, expected at most $n")
      }
    }
    val out = Array.newBuilder[(Int, DeviceTableValue)]
    tables.zipWithIndex.foreach { case (ct, p) =>
      if (ct.getRowCount > 0) out += ((p, new DeviceTableValue(ct))) else ct.close()
    }
    out.result()
  }
}

/** One partition's rows of one map-side batch: a cudf contiguous table, owned until closed. */
final class DeviceTableValue(table: ContiguousTable) extends DeviceTable {
  private val buffer = table.getBuffer

  override def rows(): Long = table.getRowCount

  override def address(): Long = if (buffer == null) 0L else buffer.getAddress

  override def bytes(): Long = if (buffer == null) 0L else buffer.getLength

  override def metadata(): Array[Byte] = {
    val m = table.getMetadataDirectBuffer.duplicate()
    val out = new Array[Byte](m.remaining())
    m.get(out)
    out
  }

  override def close(): Unit = table.close()
}

/**
 * Turns landed tables back into device batches of `types`: each group of tables a reduce task reads
 * (at most `groupBytes` together, RAPIDS' target batch size) is copied with one batched copy into
 * one RMM buffer, each table unpacked in place with `Table.fromPackedTable` and the group
 * concatenated into one batch. So RAPIDS gets one batch where map tasks wrote hundreds of small
 * tables (a reducer of 200 partitions of 8 map tasks reads up to 1,600), and the cost per table is
 * that of its metadata. `readTime` and `readSize` are the exchange's deserialization time and
 * data-read size metrics.
 */
final class RapidsTableCodec(
    types: Array[DataType],
    override val groupBytes: Long,
    readTime: GpuMetric,
    readSize: GpuMetric) extends DeviceTableCodec {
  require(groupBytes > 0, s"groups of $groupBytes bytes, expected > 0")

  override def table(value: AnyRef): DeviceTable = value match {
    case t: DeviceTableValue => t
    case other => throw new IllegalArgumentException(s"Slipstream's GPU exchange got a record of " +
      s"${if (other == null) "null" else other.getClass.getName}, expected a ${classOf[DeviceTableValue].getName}")
  }

  override def assemble(tables: java.util.List[LandedTable]): AnyRef = {
    if (tables.isEmpty) {
      throw new IllegalArgumentException("no landed tables to assemble, expected at least one")
    }
    GpuSemaphore.acquireIfNecessary(TaskContext.get())
    val group = (0 until tables.size()).map(tables.get)
    readTime.ns {
      // Each table at a 256-byte boundary, as cudf's packed columns expect of their buffer.
      val at = group.scanLeft(0L)((o, t) => o + (t.bytes() + 255) / 256 * 256)
      val batch = withRetryNoSplit[ColumnarBatch] {
        unpack(group, at)
      }
      readSize += group.map(_.bytes()).sum
      batch
    }
  }

  private def unpack(group: IndexedSeq[LandedTable], at: IndexedSeq[Long]): ColumnarBatch = {
    withResource(DeviceMemoryBuffer.allocate(math.max(at.last, 1L))) { buffer =>
      // Queued on the thread's stream, as every later use of the batch is: no wait here. The landed
      // bytes outlive the copy (they are released when the task completes).
      Cuda.multiBufferCopyAsync(at.init.map(buffer.getAddress + _).toArray, group.map(_.address()).toArray,
        group.map(_.bytes()).toArray, Cuda.DEFAULT_STREAM)
      val unpacked = new Array[Table](group.length)
      withResource(unpacked) { _ =>
        group.indices.foreach { i =>
          val t = group(i)
          val meta = ByteBuffer.allocateDirect(t.metadata().length)
          meta.put(t.metadata()).flip()
          unpacked(i) = withResource(buffer.slice(at(i), t.bytes())) { s => Table.fromPackedTable(meta, s) }
          if (unpacked(i).getRowCount != t.rows()) {
            throw new IllegalStateException(
              s"a landed table unpacked to ${unpacked(i).getRowCount} rows, expected ${t.rows()}")
          }
          if (unpacked(i).getNumberOfColumns != types.length) {
            throw new IllegalStateException(
              s"a landed table unpacked to ${unpacked(i).getNumberOfColumns} columns, expected ${types.length}")
          }
        }
        if (unpacked.length == 1) {
          GpuColumnVector.from(unpacked(0), types)
        } else {
          withResource(Table.concatenate(unpacked: _*)) { t => GpuColumnVector.from(t, types) }
        }
      }
    }
  }
}

/** The partition id is the record's key, set on the GPU by RAPIDS' partitioner. */
final class PartitionIdPassThrough(override val numPartitions: Int) extends Partitioner {
  override def getPartition(key: Any): Int = key.asInstanceOf[Int]
}
