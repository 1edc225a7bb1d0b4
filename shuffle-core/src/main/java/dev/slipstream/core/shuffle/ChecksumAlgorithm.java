package dev.slipstream.core.shuffle;

import java.util.Locale;
import java.util.zip.Adler32;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;

/**
 * The per-block checksum. Slipstream follows Spark's {@code spark.shuffle.checksum.enabled};
 * the algorithm is CRC32C (hardware-accelerated) unless {@code spark.shuffle.checksum.algorithm}
 * names another one.
 */
public enum ChecksumAlgorithm {
  NONE,
  CRC32C,
  CRC32,
  ADLER32;

  /** A fresh checksum, or null for {@link #NONE}. */
  public Checksum newChecksum() {
    return switch (this) {
      case NONE -> null;
      case CRC32C -> new CRC32C();
      case CRC32 -> new CRC32();
      case ADLER32 -> new Adler32();
    };
  }

  /**
   * From Spark's settings.
   *
   * @param algorithm {@code spark.shuffle.checksum.algorithm} when set, else null
   */
  public static ChecksumAlgorithm fromSpark(boolean enabled, String algorithm) {
    if (!enabled) {
      return NONE;
    }
    if (algorithm == null) {
      return CRC32C;
    }
    String a = algorithm.trim().toUpperCase(Locale.ROOT);
    for (ChecksumAlgorithm c : values()) {
      if (c != NONE && c.name().equals(a)) {
        return c;
      }
    }
    throw new IllegalArgumentException("spark.shuffle.checksum.algorithm: got '" + algorithm
        + "', expected one of CRC32C, CRC32, ADLER32");
  }
}
