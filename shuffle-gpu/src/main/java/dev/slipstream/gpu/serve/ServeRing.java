package dev.slipstream.gpu.serve;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;

/**
 * The reader's side of a request ring of a holder's resident server
 * ({@code native/include/slipstream/serve.h}): the reader's threads post write requests into the
 * ring and read the answers the holder's kernel writes back into it. The ring's memory is shared
 * with the holder (a shared-memory file the holder maps into its GPU); every word of it has one
 * writer, so the only atomics are among this process's threads.
 *
 * <p>Tickets: a post claims the next ticket {@code t}; its slot is {@code t % slots}. The slot is
 * written only once the request {@code slots} tickets earlier has its answer and that answer was
 * taken: by its poster ({@link #await}), or, when the poster gave up on it, by whoever needs the
 * slot next, from the ring itself. The request is written, then its sequence word
 * {@code t + 1} (release); the kernel takes tickets in order and answers with the answer's
 * sequence word {@code t + 1} last.
 *
 * <p>For a holder on another machine this memory is the reader's copy of the ring: a
 * {@link Publisher} then writes each published slot into the holder's copy (an RDMA write and a
 * fetch-add of its sequence word, {@code native/include/slipstream/serve.h}), and the holder's
 * kernel writes its answers back into this copy.
 *
 * <p>Threading: thread-safe. Ownership: the caller owns the memory.
 */
public final class ServeRing {
  public static final int RING_MAGIC = 0x47535253;
  public static final int REQUEST_MAGIC = 0x51525653;
  public static final int VERSION = 2;
  public static final int HEADER_BYTES = 128;
  public static final int SLOT_BYTES = 1024;
  public static final int ANSWER_BYTES = 64;
  public static final int MAX_BLOCKS = 30;
  public static final int MAX_SLOTS = 4096;

  // slip_serve_ring_header
  static final int H_MAGIC = 0;
  static final int H_VERSION = 4;
  static final int H_NSLOTS = 8;
  static final int H_SLOT_BYTES = 12;
  static final int H_READER_PID = 16;
  static final int H_HOLDER_PID = 24;
  // slip_serve_request
  static final int R_SEQ = 0;
  static final int R_REQUEST_ID = 8;
  static final int R_MAGIC = 16;
  static final int R_NBLOCKS = 20;
  static final int R_SHUFFLE = 24;
  static final int R_FLAGS = 28;
  static final int R_LANDING_KEY = 32;
  static final int R_TABLE_OFFSET = 40;
  static final int R_DEADLINE = 48;
  static final int R_SIGNAL_OFFSET = 56;
  /** The request flag that asks for the signal word too (SLIP_SERVE_SIGNAL); the piece count sits above bit 8. */
  static final int FLAG_SIGNAL = 1;
  static final int R_BLOCKS = 64;
  // slip_serve_block
  static final int B_BYTES = 32;
  static final int B_MAP = 0;
  static final int B_PARTITION = 8;
  static final int B_DST = 16;
  static final int B_CAPACITY = 24;
  // slip_serve_done
  static final int A_SEQ = 0;
  static final int A_STATUS = 8;
  static final int A_BLOCK = 12;
  static final int A_BYTES = 16;
  static final int A_VALUE = 24;
  static final int A_TAKEN = 32;
  static final int A_COPY = 40;
  static final int A_COPIED = 48;
  static final int A_ANSWERED = 56;

  private static final VarHandle LONG = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

  /** One block of a request: a map output's partition, where it lands and how much room it has. */
  public record Block(long mapId, int partition, long landingOffset, long capacity) {}

  /**
   * A write request as the ring carries it. With {@code signalPieces} > 0 the kernel also writes
   * the host path's signal word ({@code LandingSignal}: those pieces above the block and table
   * bytes) at {@code signalOffset} before it answers; 0: no signal.
   */
  public record Request(long requestId, int shuffleId, long landingKey, long tableOffset, long deadlineNanos,
                        List<Block> blocks, long signalOffset, long signalPieces) {
    public Request {
      blocks = List.copyOf(blocks);
      if (blocks.isEmpty() || blocks.size() > MAX_BLOCKS) {
        throw new IllegalArgumentException("a ring request carries 1 to " + MAX_BLOCKS + " blocks, got "
            + blocks.size());
      }
      if (signalPieces < 0 || signalPieces >= 1 << 24) {
        throw new IllegalArgumentException("a ring request's signal counts 0 to " + ((1 << 24) - 1) + " pieces, got "
            + signalPieces);
      }
    }

    /** A request without a signal word. */
    public Request(long requestId, int shuffleId, long landingKey, long tableOffset, long deadlineNanos,
        List<Block> blocks) {
      this(requestId, shuffleId, landingKey, tableOffset, deadlineNanos, blocks, 0, 0);
    }
  }

  /**
   * The kernel's answer: {@code status} 0 (SLIP_OK) or a {@code slip_status} code naming the failed
   * check; and when the kernel served it, as {@link System#nanoTime()} instants of the holder's host
   * (the GPU's clock less the offset measured when the kernel was launched, good to half a tiny
   * kernel's launch-and-sync span: microseconds, more under a sanitizer; differences among the four
   * are the device's own): the
   * request taken, its checks done and its copy begun, the copy and the block table finished, the
   * answer written. 0 where not reached (a refused request has no copy).
   */
  public record Answer(long ticket, int status, int block, long bytes, long value, long takenNanos, long copyNanos,
                       long copiedNanos, long answeredNanos) {
    public boolean ok() {
      return status == 0;
    }
  }

  /**
   * Publishes a slot written in this copy of the ring into the holder's copy: its bytes after the
   * sequence word at {@code slotOffset}, then that word, raised by {@code seqStep}
   * ({@link #seqStep}). Throws when it cannot (the ring is then broken).
   */
  public interface Publisher {
    void publish(int slotOffset, long ticket, long seqStep);
  }

  private final ByteBuffer memory;
  private final int slots;
  private volatile Publisher publisher;
  private final AtomicLong claimed = new AtomicLong();
  /** Per slot: the ticket whose answer was taken last, + 1 (0: none yet). */
  private final AtomicLongArray taken;
  /** Per slot: a ticket whose poster gave up on it before its answer came, + 1 (0: none). */
  private final AtomicLongArray abandoned;
  private volatile boolean broken;
  private volatile RuntimeException lastFailure;

  private ServeRing(ByteBuffer memory, int slots) {
    this.memory = memory.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    this.slots = slots;
    this.taken = new AtomicLongArray(slots);
    this.abandoned = new AtomicLongArray(slots);
  }

  /** Bytes of a ring of {@code slots} slots. */
  public static long bytes(int slots) {
    return HEADER_BYTES + (long) slots * (SLOT_BYTES + ANSWER_BYTES);
  }

  /** Lays out a new ring of {@code slots} (a power of two, at most {@value #MAX_SLOTS}) over {@code memory}, zeroed. */
  public static ServeRing format(ByteBuffer memory, int slots, long pid) {
    checkSlots(slots);
    if (!memory.isDirect() || memory.capacity() < bytes(slots)) {
      throw new IllegalArgumentException("ring of " + slots + " slots needs " + bytes(slots) + " bytes of direct memory, got "
          + (memory.isDirect() ? memory.capacity() + " bytes" : "a heap buffer"));
    }
    ByteBuffer m = memory.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < bytes(slots); i += 8) {
      m.putLong(i, 0);
    }
    m.putInt(H_MAGIC, RING_MAGIC).putShort(H_VERSION, (short) VERSION).putInt(H_NSLOTS, slots)
        .putInt(H_SLOT_BYTES, SLOT_BYTES).putLong(H_READER_PID, pid);
    return new ServeRing(memory, slots);
  }

  /**
   * The ring another process formatted over {@code memory} (its header checked: magic, version,
   * slot size, a power-of-two slot count, and the memory's size), for this process to post into;
   * tickets start at 0, so one process only posts into a ring, once.
   */
  public static ServeRing open(ByteBuffer memory) {
    ByteBuffer m = memory.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    if (!memory.isDirect() || m.capacity() < HEADER_BYTES) {
      throw new IllegalArgumentException("request ring of " + m.capacity() + " bytes"
          + (memory.isDirect() ? "" : " on the heap") + ", expected direct memory of at least a " + HEADER_BYTES
          + "-byte header");
    }
    int magic = m.getInt(H_MAGIC);
    int version = m.getShort(H_VERSION);
    int slots = m.getInt(H_NSLOTS);
    int slotBytes = m.getInt(H_SLOT_BYTES);
    if (magic != RING_MAGIC || version != VERSION || slotBytes != SLOT_BYTES || slots < 1 || slots > MAX_SLOTS
        || Integer.bitCount(slots) != 1 || m.capacity() != bytes(slots)) {
      throw new IllegalArgumentException("request ring header: magic 0x" + Integer.toHexString(magic) + " version "
          + version + ", " + slots + " slots of " + slotBytes + " bytes in " + m.capacity() + " bytes; expected magic 0x"
          + Integer.toHexString(RING_MAGIC) + " version " + VERSION + ", a power of two up to " + MAX_SLOTS
          + " slots of " + SLOT_BYTES + " bytes, and " + HEADER_BYTES + " + slots x " + (SLOT_BYTES + ANSWER_BYTES)
          + " bytes");
    }
    return new ServeRing(memory, slots);
  }

  static void checkSlots(int slots) {
    if (slots < 1 || slots > MAX_SLOTS || Integer.bitCount(slots) != 1) {
      throw new IllegalArgumentException("ring of " + slots + " slots; expected a power of two up to " + MAX_SLOTS);
    }
  }

  public int slots() {
    return slots;
  }

  /** Every slot published from now on is also published by {@code p} (a ring of a holder on another machine). */
  public void publishWith(Publisher p) {
    publisher = p;
  }

  /**
   * What a holder's copy of a ring adds to ticket {@code t}'s sequence word (request or answer): it
   * holds the previous lap's ticket + 1, or 0 on the first lap, and becomes {@code t + 1}
   * ({@code slip_serve_seq_step}).
   */
  public static long seqStep(long t, int slots) {
    return t < slots ? t + 1 : slots;
  }

  private int slotAt(long ticket) {
    return HEADER_BYTES + (int) (ticket & (slots - 1)) * SLOT_BYTES;
  }

  private int answerAt(long ticket) {
    return HEADER_BYTES + slots * SLOT_BYTES + (int) (ticket & (slots - 1)) * ANSWER_BYTES;
  }

  /**
   * Posts {@code r}: claims a ticket, waits until its slot is free (up to {@code timeoutNanos}),
   * writes the request and publishes it. Returns the ticket, or -1 when the ring is broken: this
   * ticket's slot did not come free in time (the request {@code slots} tickets earlier was never
   * answered), or an earlier post found that. The kernel takes tickets in order, so no ticket after
   * an unpublished one is ever taken: the ring stays broken, and requests for its holder go
   * another way.
   */
  public long post(Request r, long timeoutNanos) {
    if (broken) {
      return -1;
    }
    long t = claimed.getAndIncrement();
    if (!awaitSlot(t, timeoutNanos)) {
      broken = true;
      return -1;
    }
    int at = slotAt(t);
    memory.putLong(at + R_REQUEST_ID, r.requestId()).putInt(at + R_MAGIC, REQUEST_MAGIC)
        .putInt(at + R_NBLOCKS, r.blocks().size()).putInt(at + R_SHUFFLE, r.shuffleId())
        .putInt(at + R_FLAGS, r.signalPieces() > 0 ? (int) (r.signalPieces() << 8) | FLAG_SIGNAL : 0)
        .putLong(at + R_LANDING_KEY, r.landingKey()).putLong(at + R_TABLE_OFFSET, r.tableOffset())
        .putLong(at + R_DEADLINE, r.deadlineNanos()).putLong(at + R_SIGNAL_OFFSET, r.signalPieces() > 0
            ? r.signalOffset() : 0);
    for (int i = 0; i < r.blocks().size(); i++) {
      Block b = r.blocks().get(i);
      int bt = at + R_BLOCKS + i * B_BYTES;
      memory.putLong(bt + B_MAP, b.mapId()).putInt(bt + B_PARTITION, b.partition()).putInt(bt + B_PARTITION + 4, 0)
          .putLong(bt + B_DST, b.landingOffset()).putLong(bt + B_CAPACITY, b.capacity());
    }
    LONG.setRelease(memory, at + R_SEQ, t + 1);
    Publisher p = publisher;
    if (p != null) {
      try {
        p.publish(at, t, seqStep(t, slots));
      } catch (RuntimeException e) {
        // Not in the holder's copy: the kernel takes tickets in order, so none after it is taken.
        broken = true;
        lastFailure = e;
        return -1;
      }
    }
    return t;
  }

  /** Why the last publish failed (null: none did). */
  public RuntimeException publishFailure() {
    return lastFailure;
  }

  /** Whether the holder serves this ring: it wrote its process id into the header once its reader entry was set. */
  public boolean holderAttached() {
    return (long) LONG.getAcquire(memory, H_HOLDER_PID) != 0;
  }

  /** Whether a post found the ring stopped (see {@link #post}). */
  public boolean broken() {
    return broken;
  }

  /** Whether ticket {@code t}'s slot came free: the request {@code slots} earlier was answered and its answer taken. */
  private boolean awaitSlot(long t, long timeoutNanos) {
    long previous = t - slots;
    if (previous < 0) {
      return true;
    }
    int s = (int) (t & (slots - 1));
    long start = System.nanoTime();
    long deadline = start + timeoutNanos;
    for (;;) {
      if (taken.get(s) == previous + 1) {
        return true;
      }
      // Its poster gave up on it: the answer in the ring, once there, frees the slot.
      if (abandoned.get(s) == previous + 1 && (long) LONG.getAcquire(memory, answerAt(previous) + A_SEQ) == previous + 1) {
        taken.accumulateAndGet(s, previous + 1, Math::max);
        return true;
      }
      long now = System.nanoTime();
      if (now > deadline) {
        return false;
      }
      pause(now - start);
    }
  }

  /** Ticket {@code t}'s answer if it has come, else null; a returned answer frees the slot. */
  public Answer poll(long t) {
    int a = answerAt(t);
    if ((long) LONG.getAcquire(memory, a + A_SEQ) != t + 1) {
      return null;
    }
    Answer answer = new Answer(t, memory.getInt(a + A_STATUS), memory.getInt(a + A_BLOCK), memory.getLong(a + A_BYTES),
        memory.getLong(a + A_VALUE), memory.getLong(a + A_TAKEN), memory.getLong(a + A_COPY),
        memory.getLong(a + A_COPIED), memory.getLong(a + A_ANSWERED));
    taken.accumulateAndGet((int) (t & (slots - 1)), t + 1, Math::max);
    return answer;
  }

  /** Waits up to {@code timeoutNanos} for ticket {@code t}'s answer; null when it did not come (the slot then frees when it does). */
  public Answer await(long t, long timeoutNanos) {
    long start = System.nanoTime();
    long deadline = start + timeoutNanos;
    for (;;) {
      Answer a = poll(t);
      if (a != null) {
        return a;
      }
      long now = System.nanoTime();
      if (now > deadline) {
        abandoned.set((int) (t & (slots - 1)), t + 1);
        return poll(t); // it may have come meanwhile
      }
      pause(now - start);
    }
  }

  /**
   * A waiting thread's pause after {@code waitedNanos}: spins for the first 2 ms (a push of tens of
   * megabytes takes hundreds of microseconds, and a park oversleeps by tens), then parks 20 us at a
   * time.
   */
  private static void pause(long waitedNanos) {
    if (waitedNanos > 2_000_000L) {
      LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(20));
    } else {
      Thread.onSpinWait();
    }
  }
}
