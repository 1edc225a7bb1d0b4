package dev.slipstream.core.shuffle;

import dev.slipstream.core.transport.RateLimitedLog;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Optional;
import java.util.regex.Pattern;
import java.util.zip.CRC32C;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A bounded ring of small messages in a shared-memory file, written by any process of the machine
 * that maps it and read by the one that made it: the way a reduce task's device write requests can
 * reach a holder on the same machine without the transport's event loops (docs/gpu.md, "Waking
 * threads"). Producers claim a slot, copy their message in and publish it; the owner polls.
 *
 * <p>Layout (little-endian): a header of {@value #HEADER} bytes (magic {@code SLIPRING}, version,
 * slot count, slot size, the owner's process id at {@value #OWNER_PID}, the ring's state at
 * {@value #STATE} (0 open, 1 closed, 2 broken: producers send nothing into a ring not open); the
 * producers' ticket counter alone on its own cache line at
 * {@value #TAIL}), then {@code slots} slots of {@code slotBytes}: sequence word (8 bytes), message
 * length (4), CRC32C of the message (4), message. Slot {@code t % slots} belongs to ticket
 * {@code t}: its sequence word is {@code t} while free for that ticket, {@code t + 1} once
 * published, and {@code t + slots} once read (free for the next lap). A producer claims ticket
 * {@code t} by advancing the counter from {@code t} when the slot's word is {@code t}, writes, and
 * publishes by moving the word from {@code t} to {@code t + 1}. A producer that claimed a slot and
 * did not publish it within {@code abandonNanos} (it died, or stalled) loses it: the owner moves the
 * word to {@code t + slots} itself, and the late producer's publish then fails (it reports the
 * message as not sent). A message whose checksum does not match (a late producer's bytes landed in a
 * reused slot) is dropped and counted.
 *
 * <p>Bad input: {@link #open} checks the file name, the header and the file's size against each
 * other and names what was got and what was expected; {@link #poll} checks each length and
 * checksum. Nothing in a ring is trusted beyond its bytes: its owner decodes and checks every
 * message as it would one from the network. A slot whose sequence word is none of its ticket's
 * (overwritten by a broken or hostile process of this user) is skipped when its ticket was claimed,
 * or given back to its ticket when not, and counted in {@link #corrupted}; no message is read from
 * it and a producer never spins on it. A ticket counter outside {@code [head, head + slots]} cannot
 * be repaired: the ring is declared broken ({@link #broken}), producers see its state and send
 * nothing more, and {@link #serve} returns. One {@link #poll} reads at most one lap of slots.
 *
 * <p>Threading: {@link Producer#offer} from any thread of any process; {@link #poll} from one
 * thread at a time. Ownership: the owner's instance deletes the file on {@link #close}; the mapping
 * goes with the garbage collector.
 */
public final class RequestRing implements AutoCloseable {
  static final long MAGIC = 0x474e495250494c53L; // "SLIPRING" little-endian
  static final int VERSION = 1;
  static final int HEADER = 128;
  static final int TAIL = 64;
  static final int OWNER_PID = 24;
  static final int STATE = 32;
  static final int OPEN = 0;
  static final int CLOSED = 1;
  static final int BROKEN = 2;
  static final int SLOT_HEADER = 16;
  public static final int MIN_SLOT_BYTES = 256;
  public static final int MAX_SLOT_BYTES = 1 << 16;
  public static final int MAX_SLOTS = 1 << 16;
  /** The most bytes of slots one ring maps. */
  public static final long MAX_RING_BYTES = 1L << 30;
  /** The names rings are made with: only such files are opened. */
  static final Pattern NAME = Pattern.compile("slipstream-ring-[0-9a-f]{32}");
  /** Whether {@code path} names a ring: absolute, its file named as {@link #create} names rings. */
  public static boolean isRingPath(String path) {
    return path.startsWith("/") && NAME.matcher(path.substring(path.lastIndexOf('/') + 1)).matches();
  }

  private static final VarHandle LONG = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final Logger LOG = LoggerFactory.getLogger(RequestRing.class);

  private final Path path;
  private final MappedByteBuffer map;
  private final int slots;
  private final int slotBytes;
  private final long abandonNanos;
  /** WARN lines about corrupt slots: at most one per 10 s. */
  private final RateLimitedLog corruptLog = new RateLimitedLog(LOG, 10_000_000_000L);
  private long head;
  /** When the owner first saw the head slot claimed and not published (0: not waiting). */
  private long stalledSince;
  private long dropped;
  private long abandoned;
  private long corrupted;
  /** Why the ring cannot be read any more (null while it can). */
  private String broken;
  private boolean closed;

  private RequestRing(Path path, MappedByteBuffer map, int slots, int slotBytes, long abandonNanos) {
    this.path = path;
    this.map = map;
    this.slots = slots;
    this.slotBytes = slotBytes;
    this.abandonNanos = abandonNanos;
  }

  /**
   * Makes a ring of {@code slots} (a power of two, 2 to {@value #MAX_SLOTS}) slots of
   * {@code slotBytes} (a multiple of 64, {@value #MIN_SLOT_BYTES} to {@value #MAX_SLOT_BYTES}) in a
   * new file of {@code dir} that only this user may open, under a random name.
   *
   * @param abandonNanos how long a claimed slot may stay unpublished before {@link #poll} takes it back
   */
  public static RequestRing create(Path dir, int slots, int slotBytes, long abandonNanos) throws IOException {
    if (slots < 2 || slots > MAX_SLOTS || Integer.bitCount(slots) != 1) {
      throw new IllegalArgumentException("request ring: " + slots + " slots, expected a power of two in 2.."
          + MAX_SLOTS);
    }
    if (slotBytes < MIN_SLOT_BYTES || slotBytes > MAX_SLOT_BYTES || slotBytes % 64 != 0) {
      throw new IllegalArgumentException("request ring: slots of " + slotBytes + " bytes, expected a multiple of 64"
          + " in " + MIN_SLOT_BYTES + ".." + MAX_SLOT_BYTES);
    }
    if ((long) slots * slotBytes > MAX_RING_BYTES) {
      throw new IllegalArgumentException("request ring: " + slots + " slots of " + slotBytes + " bytes, expected at"
          + " most " + MAX_RING_BYTES + " bytes of slots");
    }
    if (abandonNanos <= 0) {
      throw new IllegalArgumentException("request ring: abandon time " + abandonNanos + " ns, expected > 0");
    }
    removeStale(dir);
    byte[] id = new byte[16];
    RANDOM.nextBytes(id);
    Path path = dir.resolve("slipstream-ring-" + HexFormat.of().formatHex(id));
    try {
      Files.createFile(path, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    } catch (FileAlreadyExistsException e) {
      throw new IOException("request ring " + path + " exists already (random name reused?)", e);
    }
    long size = HEADER + (long) slots * slotBytes;
    MappedByteBuffer m;
    try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      m = ch.map(FileChannel.MapMode.READ_WRITE, 0, size);
    } catch (IOException | RuntimeException e) {
      Files.deleteIfExists(path);
      throw e;
    }
    m.order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < slots; i++) {
      LONG.setRelease(m, slotAt(i, slotBytes), (long) i);
    }
    LONG.setRelease(m, TAIL, 0L);
    m.putInt(8, VERSION).putInt(12, slots).putInt(16, slotBytes).putLong(OWNER_PID, ProcessHandle.current().pid());
    LONG.setRelease(m, 0, MAGIC); // last: a producer opening it sooner sees no magic and refuses it
    return new RequestRing(path, m, slots, slotBytes, abandonNanos);
  }

  /** Where slot {@code index} (a ticket modulo the slot count) starts; the ring's size keeps it an int. */
  /**
   * Deletes the rings in {@code dir} whose owner process is gone (an executor that died without
   * closing its ring); returns how many. Files of other users, or that are not rings, are left alone.
   */
  static int removeStale(Path dir) {
    int removed = 0;
    try (var files = Files.newDirectoryStream(dir, "slipstream-ring-*")) {
      for (Path f : files) {
        if (!NAME.matcher(f.getFileName().toString()).matches() || !Files.isReadable(f)) {
          continue;
        }
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
          if (ch.size() < HEADER) {
            continue;
          }
          java.nio.ByteBuffer h = java.nio.ByteBuffer.allocate(HEADER).order(ByteOrder.LITTLE_ENDIAN);
          ch.read(h, 0);
          long pid = h.getLong(OWNER_PID);
          if (h.getLong(0) == MAGIC && pid > 0 && ProcessHandle.of(pid).isEmpty()) {
            Files.deleteIfExists(f);
            removed++;
          }
        } catch (IOException | RuntimeException e) {
          // Not ours to judge (another user's, or going away): leave it.
        }
      }
    } catch (IOException e) {
      // An unreadable folder: nothing to clean.
    }
    return removed;
  }

  private static int slotAt(long index, int slotBytes) {
    return (int) (HEADER + index * slotBytes);
  }

  /** The file, to tell producers (through a channel they trust) where to {@link #open} it. */
  public Path path() {
    return path;
  }

  /** The largest message a slot holds. */
  public int maxMessage() {
    return slotBytes - SLOT_HEADER;
  }

  /**
   * The next published message, or null when there is none yet. A claimed slot left unpublished
   * for longer than the abandon time is taken back (counted in {@link #abandoned}); a message whose
   * length or checksum is wrong is dropped (counted in {@link #dropped}) and the next one is read; a
   * slot whose sequence word is corrupt is skipped or given back (counted in {@link #corrupted}).
   * Reads at most one lap of slots per call; null for good once the ring is closed or broken.
   */
  public byte[] poll() {
    for (int n = 0; n < slots; n++) {
      if (closed || broken != null) {
        return null;
      }
      int at = slotAt(head & (slots - 1), slotBytes);
      long seq = (long) LONG.getAcquire(map, at);
      if (seq == head + 1) {
        byte[] msg = read(at);
        LONG.setRelease(map, at, head + slots);
        head++;
        stalledSince = 0;
        if (msg != null) {
          return msg;
        }
        dropped++;
        continue;
      }
      long tail = (long) LONG.getAcquire(map, TAIL);
      if (tail < head || tail > head + slots) {
        breakRing("ticket counter " + tail + ", expected between the next ticket to read, " + head + ", and "
            + (head + slots) + " (" + slots + " slots)");
        return null;
      }
      if (seq == head) {
        if (tail > head) {
          // Claimed, not published yet.
          long now = System.nanoTime();
          if (stalledSince == 0) {
            stalledSince = now;
          } else if (now - stalledSince > abandonNanos && LONG.compareAndSet(map, at, head, head + slots)) {
            head++;
            stalledSince = 0;
            abandoned++;
            continue;
          }
        }
        return null;
      }
      // Neither free, claimed nor published for its ticket: the word was overwritten.
      corrupted++;
      boolean claimed = tail > head;
      corruptLog.warn(path.toString(), "request ring " + path + ": slot " + (head & (slots - 1)) + " (ticket " + head
          + ") has sequence word " + seq + ", expected " + head + " (free or claimed) or " + (head + 1)
          + " (published); " + (claimed ? "skipped, its message is lost" : "given back to its ticket"));
      if (!claimed) {
        LONG.compareAndSet(map, at, seq, head); // producers may claim it again
        return null;
      }
      // Its ticket was claimed: read nothing from it (a late publish then fails and is reported as not sent).
      if (LONG.compareAndSet(map, at, seq, head + slots)) {
        head++;
        stalledSince = 0;
      }
    }
    return null;
  }

  private void breakRing(String why) {
    broken = "request ring " + path + " is broken: " + why;
    map.putInt(STATE, BROKEN);
    LOG.error("{}; it is read no more (its producers send over the transport)", broken);
  }

  /** Why the ring cannot be read any more (its ticket counter is corrupt), or empty while it can. */
  public Optional<String> broken() {
    return Optional.ofNullable(broken);
  }

  /** The longest pause between two polls of {@link #serve} once its polling time after a message has passed. */
  public static final long PAUSE_MAX_US = 100;

  /**
   * Reads the ring on the calling thread until {@code stop} is true, handing each message to
   * {@code each}: back to back for {@code pollNanos} after each message (a producer cannot wake this
   * thread, so it polls while messages are likely), then with pauses doubling from 1 us up to
   * {@value #PAUSE_MAX_US} us. An interrupt ends a pause, not the loop: {@code stop} does, and so
   * does the ring breaking ({@link #broken}).
   */
  public void serve(long pollNanos, java.util.function.BooleanSupplier stop, java.util.function.Consumer<byte[]> each) {
    long last = System.nanoTime();
    long pauseUs = 1;
    while (!stop.getAsBoolean() && broken == null) {
      byte[] m = poll();
      if (m != null) {
        each.accept(m);
        last = System.nanoTime();
        pauseUs = 1;
      } else if (System.nanoTime() - last < pollNanos) {
        Thread.onSpinWait();
      } else {
        java.util.concurrent.locks.LockSupport.parkNanos(pauseUs * 1000);
        pauseUs = Math.min(PAUSE_MAX_US, pauseUs * 2);
      }
    }
  }

  /** The message in the slot at {@code at}, or null when its length or checksum is wrong. */
  private byte[] read(int at) {
    int len = map.getInt(at + 8);
    if (len < 0 || len > slotBytes - SLOT_HEADER) {
      return null;
    }
    byte[] msg = new byte[len];
    map.get(at + SLOT_HEADER, msg);
    CRC32C crc = new CRC32C();
    crc.update(msg);
    return (int) crc.getValue() == map.getInt(at + 12) ? msg : null;
  }

  /** Messages dropped for a wrong length or checksum. */
  public long dropped() {
    return dropped;
  }

  /** Slots taken back from producers that claimed and did not publish them in time. */
  public long abandoned() {
    return abandoned;
  }

  /** Slots found with a corrupt sequence word (skipped, or given back to their ticket). */
  public long corrupted() {
    return corrupted;
  }

  /** Deletes the file; producers that still map it write into a ring nobody reads (they time out). */
  @Override
  public void close() throws IOException {
    if (!closed) {
      closed = true;
      if (broken == null) {
        map.putInt(STATE, CLOSED); // producers that still map it send nothing more
      }
      Files.deleteIfExists(path);
    }
  }

  /**
   * Opens the ring at {@code path} to write into it. Refuses (naming what was got and what was
   * expected) a file whose name is not a ring's, a header without the magic or of another version,
   * a slot count or size out of range, or a file whose size does not match its header.
   */
  public static Producer open(Path path) throws IOException {
    if (!isRingPath(path.toString())) {
      throw new IllegalArgumentException("request ring: path " + path + ", expected an absolute path to a file named"
          + " slipstream-ring-<32 hex digits>");
    }
    try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      long size = ch.size();
      if (size < HEADER) {
        throw new IllegalArgumentException("request ring " + path + ": " + size + " bytes, expected at least the "
            + HEADER + "-byte header");
      }
      MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_WRITE, 0, size);
      m.order(ByteOrder.LITTLE_ENDIAN);
      long magic = (long) LONG.getAcquire(m, 0);
      if (magic != MAGIC) {
        throw new IllegalArgumentException("request ring " + path + ": magic 0x" + Long.toHexString(magic)
            + ", expected 0x" + Long.toHexString(MAGIC) + " (" + new String(longBytes(MAGIC), StandardCharsets.US_ASCII)
            + ")");
      }
      int version = m.getInt(8);
      int slots = m.getInt(12);
      int slotBytes = m.getInt(16);
      if (version != VERSION) {
        throw new IllegalArgumentException("request ring " + path + ": version " + version + ", expected " + VERSION);
      }
      if (slots < 2 || slots > MAX_SLOTS || Integer.bitCount(slots) != 1 || slotBytes < MIN_SLOT_BYTES
          || slotBytes > MAX_SLOT_BYTES || slotBytes % 64 != 0 || (long) slots * slotBytes > MAX_RING_BYTES) {
        throw new IllegalArgumentException("request ring " + path + ": " + slots + " slots of " + slotBytes
            + " bytes, expected a power of two in 2.." + MAX_SLOTS + " slots of a multiple of 64 in "
            + MIN_SLOT_BYTES + ".." + MAX_SLOT_BYTES + " bytes, at most " + MAX_RING_BYTES + " bytes in all");
      }
      long want = HEADER + (long) slots * slotBytes;
      if (size != want) {
        throw new IllegalArgumentException("request ring " + path + ": " + size + " bytes, expected " + want + " for "
            + slots + " slots of " + slotBytes + " bytes");
      }
      return new Producer(path, m, slots, slotBytes);
    }
  }

  private static byte[] longBytes(long v) {
    byte[] b = new byte[8];
    for (int i = 0; i < 8; i++) {
      b[i] = (byte) (v >>> (8 * i));
    }
    return b;
  }

  /** A process's handle to write into a ring. Threading: thread-safe. */
  public static final class Producer {
    private final Path path;
    private final MappedByteBuffer map;
    private final int slots;
    private final int slotBytes;

    private Producer(Path path, MappedByteBuffer map, int slots, int slotBytes) {
      this.path = path;
      this.map = map;
      this.slots = slots;
      this.slotBytes = slotBytes;
    }

    public Path path() {
      return path;
    }

    /** The largest message a slot holds. */
    public int maxMessage() {
      return slotBytes - SLOT_HEADER;
    }

    /**
     * Puts {@code msg} into the ring; false (nothing sent) when it is larger than a slot holds,
     * when the ring is full, closed or broken, when the slot's sequence word is corrupt, or when the
     * owner took the slot back before this producer published it.
     */
    public boolean offer(byte[] msg) {
      if (msg.length > slotBytes - SLOT_HEADER || map.getInt(STATE) != OPEN) {
        return false;
      }
      long t;
      int at;
      for (;;) {
        t = (long) LONG.getAcquire(map, TAIL);
        at = slotAt(t & (slots - 1), slotBytes);
        long seq = (long) LONG.getAcquire(map, at);
        if (seq == t) {
          if (LONG.compareAndSet(map, TAIL, t, t + 1)) {
            break;
          }
        } else if (seq < t) {
          return false; // the owner has not read the previous lap's message in this slot: full
        } else if ((long) LONG.getAcquire(map, TAIL) == t) {
          // A word ahead of its ticket means another producer claimed t, and then the counter has
          // moved on; it has not: the word was overwritten (the owner gives the slot back).
          return false;
        }
        // else another producer claimed ticket t first: try the next one
        Thread.onSpinWait();
      }
      CRC32C crc = new CRC32C();
      crc.update(msg);
      map.putInt(at + 8, msg.length);
      map.putInt(at + 12, (int) crc.getValue());
      map.put(at + SLOT_HEADER, msg);
      return LONG.compareAndSet(map, at, t, t + 1); // release: the bytes above are seen before the word
    }
  }
}
