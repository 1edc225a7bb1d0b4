package dev.slipstream.core.config;

import java.time.Duration;
import java.util.List;
import java.util.Locale;

/**
 * Parsing of sizes ({@code 64k}, {@code 4m}, {@code 1g}, plain bytes) and durations
 * ({@code 500ms}, {@code 30s}, {@code 2min}, {@code 1h}, plain milliseconds), Spark's spelling.
 * Bad values fail with the key, the value got and what is expected.
 */
public final class ConfigParsers {
  private ConfigParsers() {}

  public static long parseSize(String key, String value) {
    String v = value.trim().toLowerCase(Locale.ROOT);
    long mult = 1;
    String digits = v;
    if (v.endsWith("kb") || v.endsWith("mb") || v.endsWith("gb") || v.endsWith("tb")) {
      digits = v.substring(0, v.length() - 2);
      mult = unit(v.charAt(v.length() - 2));
    } else if (!v.isEmpty() && Character.isLetter(v.charAt(v.length() - 1)) && v.charAt(v.length() - 1) != 'b') {
      digits = v.substring(0, v.length() - 1);
      mult = unit(v.charAt(v.length() - 1));
    } else if (v.endsWith("b")) {
      digits = v.substring(0, v.length() - 1);
    }
    try {
      long n = Long.parseLong(digits.trim());
      if (mult <= 0 || n < 0) {
        throw new NumberFormatException();
      }
      return Math.multiplyExact(n, mult);
    } catch (NumberFormatException | ArithmeticException e) {
      throw new IllegalArgumentException(key + ": got '" + value
          + "', expected a non-negative size such as 65536, 64k, 4m or 1g");
    }
  }

  private static long unit(char c) {
    return switch (c) {
      case 'k' -> 1L << 10;
      case 'm' -> 1L << 20;
      case 'g' -> 1L << 30;
      case 't' -> 1L << 40;
      default -> -1;
    };
  }

  public static Duration parseDuration(String key, String value) {
    String v = value.trim().toLowerCase(Locale.ROOT);
    String[][] units = {{"ms", "1"}, {"min", "60000"}, {"s", "1000"}, {"m", "60000"}, {"h", "3600000"}, {"d", "86400000"}};
    long mult = 1;
    String digits = v;
    for (String[] u : units) {
      if (v.endsWith(u[0])) {
        digits = v.substring(0, v.length() - u[0].length());
        mult = Long.parseLong(u[1]);
        break;
      }
    }
    try {
      long n = Long.parseLong(digits.trim());
      if (n < 0) {
        throw new NumberFormatException();
      }
      return Duration.ofMillis(Math.multiplyExact(n, mult));
    } catch (NumberFormatException | ArithmeticException e) {
      throw new IllegalArgumentException(key + ": got '" + value
          + "', expected a non-negative duration such as 500ms, 30s, 2min or 1h");
    }
  }

  public static boolean parseBoolean(String key, String value) {
    String v = value.trim().toLowerCase(Locale.ROOT);
    if (v.equals("true")) {
      return true;
    }
    if (v.equals("false")) {
      return false;
    }
    throw new IllegalArgumentException(key + ": got '" + value + "', expected true or false");
  }

  public static int parseInt(String key, String value, int min, int max) {
    try {
      int n = Integer.parseInt(value.trim());
      if (n < min || n > max) {
        throw new NumberFormatException();
      }
      return n;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(key + ": got '" + value + "', expected an integer in [" + min + ", " + max + "]");
    }
  }

  public static String parseChoice(String key, String value, List<String> valid) {
    String v = value.trim().toLowerCase(Locale.ROOT);
    if (!valid.contains(v)) {
      throw new IllegalArgumentException(key + ": got '" + value + "', expected one of " + valid);
    }
    return v;
  }
}
