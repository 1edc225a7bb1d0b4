package dev.slipstream.rapids;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class RapidsClassesTest {
  @Test
  void loadsTheRapidsClassesItCompiledAgainst() {
    assertEquals("org.apache.spark.sql.rapids.execution.GpuShuffleExchangeExecBaseWithMetrics",
        RapidsClasses.exchangeBase().getName());
    assertEquals("org.apache.spark.rapids.shims.GpuShuffleExchangeExec", RapidsClasses.shuffleExchange().getName());
    assertEquals("com.nvidia.spark.rapids.GpuColumnVector", RapidsClasses.columnVector().getName());
    assertEquals("ai.rapids.cudf.Table", RapidsClasses.table().getName());
  }
}
