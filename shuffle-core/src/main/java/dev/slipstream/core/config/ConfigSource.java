package dev.slipstream.core.config;

import java.util.Map;
import java.util.Optional;

/**
 * Where configuration comes from: Spark's conf in the plugin, a map in tests. Keys are full
 * names such as {@code spark.slipstream.transport}.
 */
@FunctionalInterface
public interface ConfigSource {
  Optional<String> get(String key);

  static ConfigSource of(Map<String, String> map) {
    Map<String, String> copy = Map.copyOf(map);
    return key -> Optional.ofNullable(copy.get(key));
  }

  static ConfigSource empty() {
    return key -> Optional.empty();
  }
}
