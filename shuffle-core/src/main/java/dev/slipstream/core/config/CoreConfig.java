package dev.slipstream.core.config;

import java.time.Duration;

/**
 * Typed configuration of the shuffle protocol (map-output store, landing pool, reader limits).
 * All values are validated when the object is built, so bad settings fail at start-up.
 */
public final class CoreConfig {
  public static final ConfigEntry<Long> MAP_OUTPUT_MEMORY = ConfigEntry.size(
      "spark.slipstream.mapOutput.memoryBytes", "256m",
      "Off-heap registered memory per executor for map output; beyond it, map output spills to local files.");
  public static final ConfigEntry<Long> MAP_OUTPUT_SEGMENT = ConfigEntry.size(
      "spark.slipstream.mapOutput.segmentBytes", "8m",
      "Unit in which the map-output store allocates and registers memory (registered once, reused).");
  public static final ConfigEntry<Long> MAP_OUTPUT_PAGE = ConfigEntry.size(
      "spark.slipstream.mapOutput.pageBytes", "64k",
      "Page size inside map-output segments; one map output occupies whole pages.");
  public static final ConfigEntry<Long> LANDING_BYTES = ConfigEntry.size(
      "spark.slipstream.landing.bytes", "96m",
      "Registered landing memory per executor that holders write fetched blocks into.");
  public static final ConfigEntry<Long> MAX_BYTES_IN_FLIGHT = ConfigEntry.size(
      "spark.slipstream.reader.maxBytesInFlight", "32m",
      "Most landing bytes one reduce task has requested or holds unconsumed.");
  public static final ConfigEntry<Long> MAX_REQUEST_BYTES = ConfigEntry.size(
      "spark.slipstream.reader.maxRequestBytes", "4m",
      "Most bytes one write request asks a holder for; larger blocks arrive in chunks of this size.");
  public static final ConfigEntry<Duration> FETCH_TIMEOUT = ConfigEntry.duration(
      "spark.slipstream.reader.fetchTimeout", "120s",
      "Deadline for a holder to complete a write request; past it the fetch fails (FetchFailedException).");
  public static final ConfigEntry<Integer> SERVER_THREADS = ConfigEntry.integer(
      "spark.slipstream.server.threads", "2", 1, 256,
      "Threads per executor that serve write requests (read map output, post writes).");

  private final long mapOutputMemory;
  private final long segmentBytes;
  private final long pageBytes;
  private final long landingBytes;
  private final long maxBytesInFlight;
  private final long maxRequestBytes;
  private final Duration fetchTimeout;
  private final int serverThreads;
  private final dev.slipstream.core.shuffle.ChecksumAlgorithm checksum;

  public CoreConfig(ConfigSource source) {
    mapOutputMemory = MAP_OUTPUT_MEMORY.get(source);
    segmentBytes = MAP_OUTPUT_SEGMENT.get(source);
    pageBytes = MAP_OUTPUT_PAGE.get(source);
    landingBytes = LANDING_BYTES.get(source);
    maxBytesInFlight = MAX_BYTES_IN_FLIGHT.get(source);
    maxRequestBytes = MAX_REQUEST_BYTES.get(source);
    fetchTimeout = FETCH_TIMEOUT.get(source);
    serverThreads = SERVER_THREADS.get(source);
    // Spark's own keys: Slipstream checksums blocks when Spark's shuffle checksums are on.
    checksum = dev.slipstream.core.shuffle.ChecksumAlgorithm.fromSpark(
        ConfigParsers.parseBoolean("spark.shuffle.checksum.enabled",
            source.get("spark.shuffle.checksum.enabled").orElse("true")),
        source.get("spark.shuffle.checksum.algorithm").orElse(null));
    require(pageBytes >= 4096 && Long.bitCount(pageBytes) == 1, MAP_OUTPUT_PAGE, pageBytes, "a power of two >= 4096");
    require(segmentBytes >= pageBytes && segmentBytes % pageBytes == 0 && segmentBytes <= (1L << 30),
        MAP_OUTPUT_SEGMENT, segmentBytes, "a multiple of pageBytes (" + pageBytes + ") up to 1g");
    require(landingBytes >= 64 * 1024 && landingBytes <= Integer.MAX_VALUE - 8,
        LANDING_BYTES, landingBytes, "between 64k and 2047m");
    require(maxRequestBytes >= 4096 && maxRequestBytes <= landingBytes / 2,
        MAX_REQUEST_BYTES, maxRequestBytes, "between 4k and half of " + LANDING_BYTES.key() + " (" + landingBytes + ")");
    require(maxBytesInFlight >= maxRequestBytes && maxBytesInFlight <= landingBytes,
        MAX_BYTES_IN_FLIGHT, maxBytesInFlight, "between maxRequestBytes (" + maxRequestBytes + ") and "
            + LANDING_BYTES.key() + " (" + landingBytes + ")");
    require(fetchTimeout.toMillis() >= 100, FETCH_TIMEOUT, fetchTimeout.toMillis() + "ms", "at least 100ms");
  }

  private static void require(boolean ok, ConfigEntry<?> e, Object got, String expected) {
    if (!ok) {
      throw new IllegalArgumentException(e.key() + ": got " + got + ", expected " + expected);
    }
  }

  public long mapOutputMemory() { return mapOutputMemory; }
  public long segmentBytes() { return segmentBytes; }
  public long pageBytes() { return pageBytes; }
  public long landingBytes() { return landingBytes; }
  public long maxBytesInFlight() { return maxBytesInFlight; }
  public long maxRequestBytes() { return maxRequestBytes; }
  public Duration fetchTimeout() { return fetchTimeout; }
  public int serverThreads() { return serverThreads; }
  public dev.slipstream.core.shuffle.ChecksumAlgorithm checksum() { return checksum; }
}
