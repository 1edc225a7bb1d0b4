package dev.slipstream.bench;

import dev.slipstream.core.config.ConfigEntry;
import dev.slipstream.core.config.CoreConfig;
import dev.slipstream.core.transport.tcp.TcpConfig;
import dev.slipstream.spark.SlipstreamConf;
import dev.slipstream.spark.gpu.GpuConf;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;

/**
 * Renders {@code docs/configuration.md} from the typed config classes' entries. A test fails
 * when the committed file is stale; {@code main} rewrites it.
 */
public final class ConfigurationDoc {
  private ConfigurationDoc() {}

  /** Every entry of every module's config class. */
  public static List<ConfigEntry<?>> entries() {
    // Touch each config class so its entries are declared.
    List.of(SlipstreamConf.TRANSPORT, CoreConfig.MAP_OUTPUT_MEMORY, TcpConfig.PORT, GpuConf.MODE);
    return ConfigEntry.all().stream().sorted(Comparator.comparing(ConfigEntry::key)).toList();
  }

  public static String render() {
    StringBuilder b = new StringBuilder();
    b.append("# Configuration reference\n\n")
        .append("Generated from the typed config classes (`SlipstreamConf`, `CoreConfig`, `TcpConfig`, `GpuConf`) by\n")
        .append("`dev.slipstream.bench.ConfigurationDoc`; `ConfigurationDocTest` fails when this file is stale.\n")
        .append("Regenerate: `mvn -B -q -DskipTests package -pl integration-tests -am && java -cp \"$(ls spark-plugin/target/spark3.5/*_2.12.jar):integration-tests/target/spark3.5/classes:integration-tests/target/spark3.5/spark-home/jars/*\" dev.slipstream.bench.ConfigurationDoc docs/configuration.md`.\n\n")
        .append("All values are validated when the shuffle manager starts: a bad value fails with the key, the\n")
        .append("value got and what is expected. Sizes take `k`, `m`, `g` suffixes; durations `ms`, `s`, `min`, `h`.\n\n")
        .append("| key | default | meaning |\n|---|---|---|\n");
    for (ConfigEntry<?> e : entries()) {
      b.append("| `").append(e.key()).append("` | `").append(e.defaultValue()).append("` | ")
          .append(e.doc().replace("|", "\\|")).append(" |\n");
    }
    return b.toString();
  }

  public static void main(String[] args) throws IOException {
    Path out = Path.of(args.length > 0 ? args[0] : "docs/configuration.md");
    Files.writeString(out, render());
    System.out.println("wrote " + out);
  }
}
