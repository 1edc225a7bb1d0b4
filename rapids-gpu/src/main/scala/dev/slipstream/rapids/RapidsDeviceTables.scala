package dev.slipstream.rapids

import java.nio.ByteBuffer

import ai.rapids.cudf.{BaseDeviceMemoryBuffer, ContiguousTable, Cuda, DeviceMemoryBuffer, MemoryBuffer, Table}
import com.nvidia.spark.rapids.{GpuBindReferences, GpuColumnVector, GpuExpression, GpuHashPartitioningBase, GpuMetric, GpuPartitioning, GpuRangePartitioner, GpuSemaphore, GpuSinglePartitioning, GpuSorter, SpillPriorities, SpillableColumnarBatch}
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
 * Slipstream's device-table writer. Reduce side: each landed table is copied into a fresh RMM buffer
 * and unpacked with `Table.fromPackedTable` into a batch of the exchange's Spark types.
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
    new DeviceTablesDependency(records, new PartitionIdPassThrough(n), types,
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

/** Turns landed tables back into device batches of `types`. */
final class RapidsTableCodec(types: Array[DataType]) extends DeviceTableCodec {
  override def table(value: AnyRef): DeviceTable = value match {
    case t: DeviceTableValue => t
    case other => throw new IllegalArgumentException(s"Slipstream's GPU exchange got a record of " +
      s"${if (other == null) "null" else other.getClass.getName}, expected a ${classOf[DeviceTableValue].getName}")
  }

  override def assemble(landed: LandedTable): AnyRef = {
    GpuSemaphore.acquireIfNecessary(TaskContext.get())
    val buffer = DeviceMemoryBuffer.allocate(math.max(landed.bytes(), 1L))
    withResource(buffer) { b =>
      // Queued on the thread's stream, as every later use of the batch is: no wait here. The
      // landed bytes outlive it (they are released when the task completes).
      withResource(new LandedView(landed.address(), landed.bytes())) { src =>
        b.copyFromDeviceBufferAsync(0, src, 0, landed.bytes(), Cuda.DEFAULT_STREAM)
      }
      val meta = ByteBuffer.allocateDirect(landed.metadata().length)
      meta.put(landed.metadata()).flip()
      withResource(Table.fromPackedTable(meta, b)) { t =>
        if (t.getRowCount != landed.rows()) {
          throw new IllegalStateException(s"a landed table unpacked to ${t.getRowCount} rows, expected ${landed.rows()}")
        }
        if (t.getNumberOfColumns != types.length) {
          throw new IllegalStateException(
            s"a landed table unpacked to ${t.getNumberOfColumns} columns, expected ${types.length}")
        }
        GpuColumnVector.from(t, types)
      }
    }
  }
}

/** Slipstream's landed bytes as a cudf buffer to copy from; owns nothing. */
private final class LandedView(address: Long, length: Long)
  extends BaseDeviceMemoryBuffer(address, length, null: MemoryBuffer.MemoryBufferCleaner) {
  override def slice(offset: Long, len: Long): MemoryBuffer =
    throw new UnsupportedOperationException("a view of landed shuffle bytes is not sliced")
}

/** The partition id is the record's key, set on the GPU by RAPIDS' partitioner. */
final class PartitionIdPassThrough(override val numPartitions: Int) extends Partitioner {
  override def getPartition(key: Any): Int = key.asInstanceOf[Int]
}
