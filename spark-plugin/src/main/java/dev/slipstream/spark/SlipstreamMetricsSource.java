package dev.slipstream.spark;

import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import java.util.function.Supplier;
import java.util.Map;
import org.apache.spark.metrics.source.Source;

/**
 * Slipstream's counters in Spark's metrics system (source name {@code slipstream}): bytes written
 * one-sided, requests sent, served and failed, checksum refetches, registered memory in use.
 * Every sink Spark is configured with (JMX, Prometheus servlet, CSV, ...) reports them.
 */
final class SlipstreamMetricsSource implements Source {
  static final String NAME = "slipstream";

  private final MetricRegistry registry = new MetricRegistry();

  SlipstreamMetricsSource(Supplier<Map<String, Long>> counters) {
    for (String key : counters.get().keySet()) {
      registry.register(key, (Gauge<Long>) () -> counters.get().getOrDefault(key, 0L));
    }
  }

  @Override
  public String sourceName() {
    return NAME;
  }

  @Override
  public MetricRegistry metricRegistry() {
    return registry;
  }
}
