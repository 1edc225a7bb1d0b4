package dev.slipstream.core.memory;

import java.nio.ByteBuffer;

/**
 * Where a node's registered host memory (the landing pool, map-output segments) comes from. What
 * a fresh buffer holds is unspecified: its users write every byte before anything reads it (a
 * landing range's signal slot is reset before each request, a map output's pages are read only
 * up to the lengths written).
 *
 * <p>{@link #JDK} zeroes the whole buffer when it is made and counts it against
 * {@code -XX:MaxDirectMemorySize}; an allocator that maps memory without touching it (Spark's
 * {@code Platform.allocateDirectBuffer}, which the plugin uses) gets its pages from the kernel
 * as they are first written, so a large pool costs nothing at start-up.
 *
 * <p>Threading: implementations are thread-safe.
 */
@FunctionalInterface
public interface DirectMemory {
  /** A direct buffer of {@code bytes}, position 0, limit {@code bytes}. */
  ByteBuffer allocate(int bytes);

  /** {@link ByteBuffer#allocateDirect}. */
  DirectMemory JDK = ByteBuffer::allocateDirect;
}
