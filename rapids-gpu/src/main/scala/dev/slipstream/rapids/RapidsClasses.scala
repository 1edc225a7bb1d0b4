package dev.slipstream.rapids

/** Names of the RAPIDS classes this module compiles against (checks the compile classpath). */
object RapidsClasses {
  val exchangeBase: Class[_] = classOf[org.apache.spark.sql.rapids.execution.GpuShuffleExchangeExecBaseWithMetrics]
  val shuffleCoalesce: Class[_] = classOf[com.nvidia.spark.rapids.GpuShuffleCoalesceExec]
  val columnVector: Class[_] = classOf[com.nvidia.spark.rapids.GpuColumnVector]
  val table: Class[_] = classOf[ai.rapids.cudf.Table]
  val shuffleExchange: Class[_] = classOf[org.apache.spark.rapids.shims.GpuShuffleExchangeExec]
}
