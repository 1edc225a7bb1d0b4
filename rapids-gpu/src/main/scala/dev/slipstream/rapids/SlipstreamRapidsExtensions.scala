package dev.slipstream.rapids

import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan}

/**
 * Session extensions that put the RAPIDS Accelerator's shuffle exchanges on Slipstream's GPU path:
 * `spark.sql.extensions=dev.slipstream.rapids.SlipstreamRapidsExtensions`. RAPIDS appends its own
 * extensions after the ones configured, and Spark applies the columnar rules' post-transition
 * halves in reverse order, so this rule sees each plan after RAPIDS has finished with it
 * ([[DeviceShuffleOverrides]] says what it changes).
 *
 * This class refers to no RAPIDS class: RAPIDS' classes become loadable only once its plugin has
 * set up its class loader, which is after the session's extensions are instantiated.
 */
class SlipstreamRapidsExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    extensions.injectColumnar(_ => new DeviceShuffleRule)
  }
}

/** The columnar rule of [[SlipstreamRapidsExtensions]]. */
class DeviceShuffleRule extends ColumnarRule {
  override def postColumnarTransitions: org.apache.spark.sql.catalyst.rules.Rule[SparkPlan] =
    new org.apache.spark.sql.catalyst.rules.Rule[SparkPlan] {
      override def apply(plan: SparkPlan): SparkPlan = DeviceShuffleOverrides.apply(plan)
    }
}
