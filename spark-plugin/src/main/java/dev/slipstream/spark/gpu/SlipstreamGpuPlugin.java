package dev.slipstream.spark.gpu;

import dev.slipstream.spark.SlipstreamShuffleManager;
import java.util.Map;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;
import org.apache.spark.resource.ResourceInformation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code spark.plugins=dev.slipstream.spark.gpu.SlipstreamGpuPlugin}: on each executor, hands the
 * GPU that Spark's resource scheduling assigned it ({@code spark.executor.resource.gpu.amount=1}
 * and a discovery script such as {@code bin/slipstream-gpu-discover}) to Slipstream's shuffle
 * manager, which opens it and registers the executor's GPU endpoint. Spark gives an executor's
 * resources only to its plugins (and to tasks that ask for them), hence this plugin.
 *
 * <p>Threading: Spark calls {@code init} once per executor on its start-up thread.
 */
public final class SlipstreamGpuPlugin implements SparkPlugin {
  private static final Logger LOG = LoggerFactory.getLogger(SlipstreamGpuPlugin.class);

  private static void handOver(int ordinal, String whyNone) {
    long deadline = System.nanoTime() + 120_000_000_000L;
    while (System.nanoTime() < deadline) {
      SparkEnv env = SparkEnv.get();
      Object m = env == null ? null : env.shuffleManager();
      if (m instanceof SlipstreamShuffleManager s) {
        s.gpuAssigned(ordinal, whyNone);
        return;
      }
      if (m != null) {
        LOG.warn("{} is set but the shuffle manager is {}, not Slipstream's; it does nothing",
            SlipstreamGpuPlugin.class.getName(), m.getClass().getName());
        return;
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        return;
      }
    }
    LOG.warn("No shuffle manager appeared within 120 s; Slipstream's GPU stays closed on this executor");
  }

  @Override
  public DriverPlugin driverPlugin() {
    return null;
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new ExecutorPlugin() {
      @Override
      public void init(PluginContext ctx, Map<String, String> extraConf) {
        dev.slipstream.core.config.ConfigSource conf = dev.slipstream.spark.SlipstreamConf.source(ctx.conf());
        String resource = GpuConf.RESOURCE.get(conf);
        ResourceInformation ri = ctx.resources().get(resource);
        String mode = GpuConf.MODE.get(conf);
        if ("require".equals(mode)) {
          // Fail the executor's start (Spark stops it when a plugin's init throws).
          if (ri == null) {
            throw new IllegalStateException(GpuConf.MODE.key() + "=require, but Spark assigned no '" + resource
                + "' resource to this executor (expected spark.executor.resource." + resource + ".amount=1)");
          }
          dev.slipstream.gpu.GpuProbe probe = dev.slipstream.gpu.GpuRuntime.probe();
          if (!probe.available()) {
            throw new IllegalStateException(GpuConf.MODE.key() + "=require, but " + probe.reason());
          }
        }
        int ordinal = ri == null ? -1 : GpuConf.ordinal(resource, ri.addresses());
        String whyNone = ri == null ? "Spark assigned no '" + resource + "' resource to this executor (expected"
            + " spark.executor.resource." + resource + ".amount=1 and a discovery script)" : null;
        // Spark 4 may build the shuffle manager after the plugins; hand over once it exists.
        Thread t = new Thread(() -> handOver(ordinal, whyNone), "slipstream-gpu-plugin");
        t.setDaemon(true);
        t.start();
      }
    };
  }
}
