package dev.slipstream.bench.tpch;

import java.util.List;
import java.util.Locale;

/**
 * A minimal JSON writer for the report (Spark's Jackson is not pulled in, so the runner works
 * with whatever Jackson SPARK_HOME has). Not thread-safe.
 */
final class Json {
  private final StringBuilder sb = new StringBuilder();
  private boolean needComma;

  Json open(char c) {
    comma();
    sb.append(c);
    needComma = false;
    return this;
  }

  Json close(char c) {
    sb.append(c);
    needComma = true;
    return this;
  }

  Json key(String k) {
    comma();
    quote(k);
    sb.append(':');
    needComma = false;
    return this;
  }

  Json field(String k, String v) {
    key(k);
    quote(v);
    needComma = true;
    return this;
  }

  Json field(String k, long v) {
    key(k);
    sb.append(v);
    needComma = true;
    return this;
  }

  Json field(String k, boolean v) {
    key(k);
    sb.append(v);
    needComma = true;
    return this;
  }

  Json field(String k, double v) {
    key(k);
    return value(v);
  }

  Json value(double v) {
    comma();
    sb.append(Double.isNaN(v) || Double.isInfinite(v) ? "null" : String.format(Locale.ROOT, "%.4f", v));
    needComma = true;
    return this;
  }

  Json strings(String k, List<String> v) {
    key(k).open('[');
    for (String s : v) {
      comma();
      quote(s);
      needComma = true;
    }
    return close(']');
  }

  private void comma() {
    if (needComma) {
      sb.append(',');
    }
  }

  private void quote(String s) {
    sb.append('"');
    for (char c : s.toCharArray()) {
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\n' -> sb.append("\\n");
        default -> {
          if (c < 0x20) {
            sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
        }
      }
    }
    sb.append('"');
  }

  @Override
  public String toString() {
    return sb.toString();
  }
}
