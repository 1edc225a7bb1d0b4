package dev.slipstream.rapids

import ai.rapids.cudf.{Cuda, DeviceMemoryBuffer, HostMemoryBuffer, Table}
import com.nvidia.spark.rapids.jni.kudo.KudoGpuSerializer
import com.nvidia.spark.rapids.{GpuBindReferences, GpuColumnVector, GpuExpression, GpuHashPartitioningBase, GpuMetric, GpuPartitioning, GpuRangePartitioner, GpuSemaphore, GpuSinglePartitioning, GpuSorter, NoopMetric, RapidsConf, SpillPriorities, SpillableColumnarBatch}
import com.nvidia.spark.rapids.Arm.withResource
import com.nvidia.spark.rapids.RmmRapidsRetryIterator.withRetryNoSplit
import com.nvidia.spark.rapids.shims.GpuRangePartitioning
import java.util.Locale

import dev.slipstream.spark.gpu.{DeviceTableCodec, DeviceTableDependency, GpuConf}
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
 * it, and serialized on the GPU into one Kudo piece per non-empty partition (RAPIDS' shuffle format,
 * self-describing), compressed on the GPU with LZ4 when `spark.slipstream.rapids.compression=lz4`
 * ([[DeviceLz4]]); the records `(partition, DeviceTableValue)` go to Slipstream's device-table
 * writer. Reduce side: [[RapidsTableCodec]] turns groups of landed pieces into batches of the
 * exchange's Spark types.
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
    val lz4 = compression(SQLConf.get)
    val tables: RDD[Product2[Int, AnyRef]] = input.mapPartitions { it =>
      it.flatMap { batch =>
        val parts = partitionTime.ns(split(bound, n, batch, lz4))
        parts.foreach { case (_, t) =>
          rows += t.rows()
          dataSize += t.serializedBytes
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

  /** Whether `conf` asks for pieces compressed on the GPU (`spark.slipstream.rapids.compression`). */
  private[rapids] def compression(conf: SQLConf): Boolean = {
    val key = GpuConf.RAPIDS_COMPRESSION.key
    conf.getConfString(key, GpuConf.RAPIDS_COMPRESSION.defaultValue).trim.toLowerCase(Locale.ROOT) match {
      case "none" => false
      case "lz4" => true
      case other => throw new IllegalArgumentException(s"$key is '$other', expected 'none' or 'lz4'")
    }
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

  /**
   * `batch` (closed here) cut by partition and serialized on the GPU in RAPIDS' Kudo format
   * (`KudoGpuSerializer.splitAndSerializeToDevice`, as RAPIDS' own GPU shuffle serialization): one
   * device buffer holding one piece per partition, partition i's rows starting at row `starts(i)`.
   * Returns a piece per non-empty partition, each a slice of that buffer, or with `lz4` where that
   * makes it smaller, its compressed chunks ([[DeviceLz4.compress]]).
   */
  private def split(bound: GpuExpression, n: Int, batch: ColumnarBatch, lz4: Boolean)
      : Array[(Int, DeviceTableValue)] = {
    if (batch.numRows() == 0) {
      batch.close()
      return Array.empty
    }
    val (starts, columns): (Array[Int], Array[GpuColumnVector]) = bound match {
      // RAPIDS' range partitioner retries on GPU memory pressure itself; the others run under a retry
      // here, on a spillable copy of the batch, as RAPIDS' own exchange does.
      case r: GpuRangePartitioner => r.computeBoundsAndCloseWithRetry(batch)
      case _ =>
        withRetryNoSplit(SpillableColumnarBatch(batch, SpillPriorities.ACTIVE_ON_DECK_PRIORITY)) { s =>
          val b = s.getColumnarBatch()
          bound match {
            case h: GpuHashPartitioningBase => h.partitionInternalAndClose(b)
            case _ => withResource(b) { _ => (Array(0), GpuColumnVector.extractColumns(b).map(_.incRefCount())) }
          }
        }
    }
    // A range partitioner has as many partitions as bounds were found plus one, at most n (as
    // Spark's): the pieces are partitions 0, 1, ... and the rest of the n are empty.
    if (starts.isEmpty || starts.length > n || starts(0) != 0) {
      columns.foreach(_.close())
      throw new IllegalStateException(s"a batch cut into ${starts.length} partitions starting at row " +
        s"${starts.headOption.getOrElse(-1)}, expected 1 to $n starting at row 0")
    }
    val (rows, buffers) = withResource(columns) { cs =>
      // The serializer reads null counts on the host: computed here first, as RAPIDS does.
      cs.foreach(_.getBase.getNullCount)
      withResource(new Table(cs.map(_.getBase): _*)) { t =>
        (t.getRowCount, withRetryNoSplit[Array[DeviceMemoryBuffer]] {
          KudoGpuSerializer.splitAndSerializeToDevice(t, starts.drop(1): _*)
        })
      }
    }
    withResource(buffers) { _ =>
      val Array(data, offsetsOnDevice) = buffers
      val offsets = withResource(HostMemoryBuffer.allocate(offsetsOnDevice.getLength)) { h =>
        // Also the wait for the serialization: Slipstream copies the pieces on a stream of its own.
        h.copyFromDeviceBuffer(offsetsOnDevice, Cuda.DEFAULT_STREAM)
        Cuda.DEFAULT_STREAM.sync()
        (0L until h.getLength / 8).map(i => h.getLong(i * 8)).toArray
      }
      if (offsets.length != starts.length + 1 || offsets(0) < 0 || offsets.last > data.getLength ||
          offsets.sliding(2).exists(w => w(1) < w(0))) {
        throw new IllegalStateException(s"GPU serialization of ${starts.length} partitions gave offsets " +
          s"${offsets.take(8).mkString("[", ", ", if (offsets.length > 8) ", ...]" else "]")} into " +
          s"${data.getLength} bytes, expected ${starts.length + 1} ascending offsets within them")
      }
      val nonEmpty = starts.indices.filter { p =>
        val partRows = (if (p + 1 < starts.length) starts(p + 1).toLong else rows) - starts(p)
        val bytes = offsets(p + 1) - offsets(p)
        if (partRows > 0 && bytes <= 0) {
          throw new IllegalStateException(
            s"GPU serialization gave partition $p of $partRows rows $bytes bytes, expected some")
        }
        partRows > 0
      }.toArray
      val at = nonEmpty.map(offsets(_))
      val lengths = nonEmpty.map(p => offsets(p + 1) - offsets(p))
      val packed = if (lz4) DeviceLz4.compress(data, at, lengths) else Array.fill(nonEmpty.length)(None)
      // Each value owns its buffer from here: a compressed one takes the buffer compress returned.
      val values = new Array[(Int, DeviceTableValue)](nonEmpty.length)
      var k = 0
      try {
        while (k < nonEmpty.length) {
          val p = nonEmpty(k)
          val partRows = (if (p + 1 < starts.length) starts(p + 1).toLong else rows) - starts(p)
          values(k) = (p, packed(k) match {
            case Some((b, piece)) => new DeviceTableValue(b, partRows, lengths(k), piece.encode())
            case None => new DeviceTableValue(data.slice(at(k), lengths(k)), partRows, lengths(k),
              Array.emptyByteArray)
          })
          k += 1
        }
      } catch {
        case e: Throwable =>
          values.take(k).foreach(_._2.close())
          packed.drop(k).flatten.foreach(_._1.close())
          throw e
      }
      values
    }
  }
}

/**
 * One partition's rows of one map-side batch: a piece in RAPIDS' Kudo format on the device, owned
 * until closed, of `serializedBytes` as serialized; stored as it is (no metadata: a Kudo piece
 * describes itself, its header leads its bytes) or as LZ4 chunks that `pieceMetadata` describes
 * ([[Lz4Piece]]).
 */
final class DeviceTableValue(
    buffer: DeviceMemoryBuffer,
    pieceRows: Long,
    val serializedBytes: Long,
    pieceMetadata: Array[Byte]) extends DeviceTable {
  override def rows(): Long = pieceRows

  override def address(): Long = buffer.getAddress

  override def bytes(): Long = buffer.getLength

  override def metadata(): Array[Byte] = pieceMetadata

  override def close(): Unit = buffer.close()
}

/**
 * Turns landed pieces back into device batches of `types`: each group of pieces a reduce task reads
 * (at most `groupBytes` together once decompressed, RAPIDS' target batch size) is copied back to back
 * into one RMM buffer with one batched copy (compressed pieces decompressed into it with one batched
 * LZ4 call, [[DeviceLz4.decompress]]) and assembled into one table by `KudoGpuSerializer.assembleFromDeviceRaw`
 * (as RAPIDS assembles Kudo pieces on the GPU). So RAPIDS gets one batch where map tasks wrote
 * hundreds of small pieces (a reducer of 200 partitions of 8 map tasks reads up to 1,600), and a
 * piece costs the host no more than its offset. `readTime` and `readSize` are the exchange's
 * deserialization time and data-read size metrics.
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

  /** A landed piece's bytes once decompressed; its descriptor checked ([[Lz4Piece.decode]]). */
  override def assembledBytes(table: LandedTable): Long = piece(table).fold(table.bytes())(_.uncompressedBytes)

  private def piece(t: LandedTable): Option[Lz4Piece] =
    if (Lz4Piece.isCompressed(t.metadata)) Some(Lz4Piece.decode(t.metadata, t.bytes)) else None

  override def assemble(tables: java.util.List[LandedTable]): AnyRef = {
    if (tables.isEmpty) {
      throw new IllegalArgumentException("no landed pieces to assemble, expected at least one")
    }
    GpuSemaphore.acquireIfNecessary(TaskContext.get())
    val group = (0 until tables.size()).map(tables.get)
    readTime.ns {
      val pieces = group.map(piece)
      val at = group.indices.scanLeft(0L)((o, i) => o + pieces(i).fold(group(i).bytes())(_.uncompressedBytes))
      val batch = withRetryNoSplit[ColumnarBatch] {
        assembleOnGpu(group, pieces, at)
      }
      readSize += at.last
      batch
    }
  }

  /**
   * The pieces of `group` (compressed where `pieces` has a descriptor) at offsets `at` (back to back,
   * the last entry their end) of one buffer, assembled.
   */
  private def assembleOnGpu(
      group: IndexedSeq[LandedTable],
      pieces: IndexedSeq[Option[Lz4Piece]],
      at: IndexedSeq[Long]): ColumnarBatch = {
    withResource(DeviceMemoryBuffer.allocate(math.max(at.last, 1L))) { data =>
      // Queued on the thread's stream, as every later use of the batch is. The landed bytes outlive
      // the copy (they are released when the task completes).
      val (plain, packed) = group.indices.partition(i => pieces(i).isEmpty)
      if (plain.nonEmpty) {
        Cuda.multiBufferCopyAsync(plain.map(i => data.getAddress + at(i)).toArray,
          plain.map(group(_).address()).toArray, plain.map(group(_).bytes()).toArray, Cuda.DEFAULT_STREAM)
      }
      DeviceLz4.decompress(packed.map(pieces(_).get), packed.map(group(_).address()),
        packed.map(i => data.getAddress + at(i)))
      withResource(HostMemoryBuffer.allocate(8L * at.length)) { h =>
        at.indices.foreach(i => h.setLong(8L * i, at(i)))
        withResource(DeviceMemoryBuffer.allocate(h.getLength)) { offsets =>
          offsets.copyFromHostBuffer(h, Cuda.DEFAULT_STREAM)
          withResource(KudoGpuSerializer.assembleFromDeviceRaw(GpuColumnVector.from(types), data, offsets)) { t =>
            val rows = group.map(_.rows()).sum
            if (t.getRowCount != rows) {
              throw new IllegalStateException(
                s"${group.length} landed pieces assembled to ${t.getRowCount} rows, expected $rows")
            }
            if (t.getNumberOfColumns != types.length) {
              throw new IllegalStateException(
                s"${group.length} landed pieces assembled to ${t.getNumberOfColumns} columns, expected ${types.length}")
            }
            GpuColumnVector.from(t, types)
          }
        }
      }
    }
  }
}

/** The partition id is the record's key, set on the GPU by RAPIDS' partitioner. */
final class PartitionIdPassThrough(override val numPartitions: Int) extends Partitioner {
  override def getPartition(key: Any): Int = key.asInstanceOf[Int]
}
