package org.apache.spark.sql.slipstream

import dev.slipstream.rapids.{RapidsTableCodec, SlipstreamGpuShuffleExchangeExec}
import dev.slipstream.spark.gpu.{DeviceTableCodec, DeviceTableDependency}

import org.apache.spark.{Partitioner, ShuffleDependency}
import org.apache.spark.rdd.RDD
import org.apache.spark.shuffle.ShuffleWriteProcessor
import org.apache.spark.sql.vectorized.ColumnarBatch

/**
 * The dependency of a [[SlipstreamGpuShuffleExchangeExec]], shuffled by Slipstream's GPU path. In a
 * package under `org.apache.spark` because its write processor's type is Spark-private.
 */
final class DeviceTablesDependency(
    rdd: RDD[_ <: Product2[Int, ColumnarBatch]],
    partitioner: Partitioner,
    codec: RapidsTableCodec,
    processor: ShuffleWriteProcessor)
  extends ShuffleDependency[Int, ColumnarBatch, ColumnarBatch](rdd, partitioner,
    shuffleWriterProcessor = processor) with DeviceTableDependency {
  override def deviceTables(): DeviceTableCodec = codec

  override def toString: String = "Slipstream GPU shuffle dependency"
}
