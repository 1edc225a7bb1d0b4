package dev.slipstream.core.config;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.function.BiFunction;

/**
 * A documented configuration key with its default. Each module's typed config class declares
 * its entries as constants; the configuration reference in {@code docs/configuration.md} is
 * generated from {@link #all()}.
 */
public final class ConfigEntry<T> {
  private static final List<ConfigEntry<?>> ALL = Collections.synchronizedList(new ArrayList<>());

  private final String key;
  private final String defaultValue;
  private final String doc;
  private final BiFunction<String, String, T> parser;

  private ConfigEntry(String key, String defaultValue, String doc, BiFunction<String, String, T> parser) {
    this.key = key;
    this.defaultValue = defaultValue;
    this.doc = doc;
    this.parser = parser;
    ALL.add(this);
  }

  public static ConfigEntry<Long> size(String key, String def, String doc) {
    return new ConfigEntry<>(key, def, doc, ConfigParsers::parseSize);
  }

  public static ConfigEntry<java.time.Duration> duration(String key, String def, String doc) {
    return new ConfigEntry<>(key, def, doc, ConfigParsers::parseDuration);
  }

  public static ConfigEntry<Boolean> bool(String key, String def, String doc) {
    return new ConfigEntry<>(key, def, doc, ConfigParsers::parseBoolean);
  }

  public static ConfigEntry<Integer> integer(String key, String def, int min, int max, String doc) {
    return new ConfigEntry<>(key, def, doc, (k, v) -> ConfigParsers.parseInt(k, v, min, max));
  }

  public static ConfigEntry<String> choice(String key, String def, List<String> valid, String doc) {
    return new ConfigEntry<>(key, def, doc, (k, v) -> ConfigParsers.parseChoice(k, v, valid));
  }

  public static ConfigEntry<String> string(String key, String def, String doc) {
    return new ConfigEntry<>(key, def, doc, (k, v) -> v.trim());
  }

  public String key() {
    return key;
  }

  public String defaultValue() {
    return defaultValue;
  }

  public String doc() {
    return doc;
  }

  /** The value from {@code source}, else the default, parsed; bad values throw naming the key. */
  public T get(ConfigSource source) {
    return parser.apply(key, source.get(key).orElse(defaultValue));
  }

  /** Every entry declared by classes loaded so far, in declaration order. */
  public static List<ConfigEntry<?>> all() {
    synchronized (ALL) {
      return List.copyOf(ALL);
    }
  }
}
