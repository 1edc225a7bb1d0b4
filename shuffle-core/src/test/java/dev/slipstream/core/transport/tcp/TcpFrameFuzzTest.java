package dev.slipstream.core.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.tcp.TcpFrame.Ack;
import dev.slipstream.core.transport.tcp.TcpFrame.ErrorReply;
import dev.slipstream.core.transport.tcp.TcpFrame.FetchAdd;
import dev.slipstream.core.transport.tcp.TcpHandshake.Hello;
import dev.slipstream.core.transport.tcp.TcpFrame.Send;
import dev.slipstream.core.transport.tcp.TcpFrame.Signal;
import dev.slipstream.core.transport.tcp.TcpFrame.Target;
import dev.slipstream.core.transport.tcp.TcpFrame.Write;
import dev.slipstream.core.transport.tcp.TcpFrame.WriteSignal;
import dev.slipstream.core.transport.tcp.TcpFrameDecoder.DecodeFailure;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.util.ReferenceCountUtil;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Random bytes and mutated valid frames (bit flips, truncation, length changes, inserted and
 * overwritten bytes, header corruption) fed to the decoder and to the receiving pipeline. The
 * receiver is checked against a model written independently here: its validation rules predict
 * the region's bytes and the exact replies (ACKs with values, ERRORs with codes), so a region
 * changes only through a fully valid operation, and nothing but typed ERROR frames comes back.
 * Seeded: a failure names its case and reproduces.
 */
@Timeout(60)
class TcpFrameFuzzTest {
  private static final long SEED = 0x5eed_5117_57ea_3L;
  private static final int REGION = 512;

  @Test
  void decoderTurnsRandomBytesIntoFramesOrOneTypedFailure() {
    Random rnd = new Random(SEED);
    for (int c = 0; c < 3000; c++) {
      byte[] input = new byte[rnd.nextInt(160)];
      rnd.nextBytes(input);
      if (rnd.nextBoolean() && input.length >= 8) { // a plausible header more often than by chance
        ByteBuffer.wrap(input).putInt(0, rnd.nextInt(input.length + 8)).put(4, (byte) 'S').put(5, (byte) 'L')
            .put(6, (byte) 1).put(7, (byte) (0x10 + rnd.nextInt(9)));
      }
      EmbeddedChannel ch = new EmbeddedChannel(new TcpFrameDecoder(4096));
      try {
        feed(ch, input, rnd);
        ch.pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
        boolean failed = false;
        for (Object o; (o = ch.readInbound()) != null; ) {
          try {
            assertTrue(!failed, "case " + c + ": output after the decode failure");
            if (o instanceof DecodeFailure f) {
              failed = true;
              assertTrue(f.error().error() != TransportError.INTERNAL, "case " + c + ": " + f.error());
            } else {
              assertTrue(o instanceof TcpFrame, "case " + c + ": decoder emitted " + o.getClass());
            }
          } finally {
            ReferenceCountUtil.release(o);
          }
        }
      } catch (RuntimeException | AssertionError e) {
        throw new AssertionError("case " + c + " input " + Arrays.toString(input), e);
      } finally {
        ch.finishAndReleaseAll();
      }
    }
  }

  @Test
  void receiverAppliesOnlyValidOperationsAndAnswersWithTypedReplies() throws Exception {
    Random rnd = new Random(SEED + 1);
    for (int c = 0; c < 4000; c++) {
      try (ReceiverHarness h = new ReceiverHarness(REGION)) {
        TcpFrame frame = randomFrame(rnd, h);
        byte[] input = mutate(ReceiverHarness.encode(frame), rnd, h);
        ReferenceCountUtil.release(frame);
        boolean endOfStream = rnd.nextBoolean();
        Model model = new Model(h);
        model.run(input, endOfStream);
        try {
          h.send(new Hello(ReceiverHarness.CLIENT));
          feedUntilClosed(h.channel, input, rnd);
          if (endOfStream && h.channel.isOpen()) {
            h.channel.pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
          }
          h.channel.checkException();
          assertEquals(model.replies, describe(h.replies()), "replies");
          assertArrayEquals(model.region, h.regionBytes(), "region bytes");
          assertEquals(model.open, h.channel.isOpen(), "connection open");
        } catch (RuntimeException | AssertionError e) {
          throw new AssertionError("case " + c + " input " + Arrays.toString(input), e);
        }
      }
    }
  }

  // ---------------------------------------------------------------- input generation

  private static void feed(EmbeddedChannel ch, byte[] input, Random rnd) {
    int pos = 0;
    while (pos < input.length) {
      int n = 1 + rnd.nextInt(input.length - pos);
      ch.writeInbound(Unpooled.wrappedBuffer(input, pos, n));
      pos += n;
    }
  }

  private static void feedUntilClosed(EmbeddedChannel ch, byte[] input, Random rnd) {
    int pos = 0;
    while (pos < input.length && ch.isOpen()) {
      int n = 1 + rnd.nextInt(input.length - pos);
      ch.writeInbound(Unpooled.wrappedBuffer(input, pos, n));
      pos += n;
    }
  }

  private static Target target(Random rnd, ReceiverHarness h, boolean atomic) {
    long id = rnd.nextInt(10) < 8 ? h.d.id() : rnd.nextLong();
    long key = rnd.nextInt(10) < 8 ? h.d.key() : rnd.nextLong();
    long offset = switch (rnd.nextInt(6)) {
      case 0, 1, 2 -> atomic ? 8L * rnd.nextInt(REGION / 8) : rnd.nextInt(REGION);
      case 3 -> rnd.nextInt(REGION + 16);
      case 4 -> Long.MAX_VALUE - rnd.nextInt(16);
      default -> -1 - rnd.nextInt(8);
    };
    return new Target(id, key, offset);
  }

  private static ByteBuf payload(Random rnd, int n) {
    byte[] b = new byte[n];
    rnd.nextBytes(b);
    return Unpooled.wrappedBuffer(b);
  }

  private static TcpFrame randomFrame(Random rnd, ReceiverHarness h) {
    long seq = 1 + rnd.nextInt(1000);
    int n = rnd.nextInt(65);
    long length = rnd.nextInt(4) == 0 ? n + rnd.nextInt(64) : n; // sometimes a part of a longer write
    long partOffset = length == n ? 0 : rnd.nextInt((int) (length - n) + 1);
    return switch (rnd.nextInt(9)) {
      case 0, 1 -> new Write(seq, target(rnd, h, false), length, partOffset, payload(rnd, n));
      case 2, 3 -> new WriteSignal(seq, target(rnd, h, false), length, partOffset, target(rnd, h, true),
          rnd.nextInt(100) - 50, payload(rnd, n));
      case 4 -> new Signal(seq, target(rnd, h, true), rnd.nextLong());
      case 5 -> new FetchAdd(seq, target(rnd, h, true), rnd.nextInt(1000));
      case 6 -> new Send(seq, payload(rnd, n));
      case 7 -> new Hello(new EndpointDescriptor("tcp", "x:" + n, null));
      default -> rnd.nextBoolean() ? new Ack(seq, rnd.nextLong()) : new ErrorReply(seq, rnd.nextInt(20), "no");
    };
  }

  private static byte[] mutate(byte[] f, Random rnd, ReceiverHarness h) {
    switch (rnd.nextInt(8)) {
      case 0 -> { } // valid as generated
      case 1 -> { // flip 1-3 bits
        for (int i = 1 + rnd.nextInt(3); i > 0; i--) {
          int bit = rnd.nextInt(f.length * 8);
          f[bit / 8] ^= (byte) (1 << (bit % 8));
        }
      }
      case 2 -> f = Arrays.copyOf(f, rnd.nextInt(f.length)); // truncate
      case 3 -> { // change the length field
        int len = ByteBuffer.wrap(f).getInt(0);
        int[] choices = {len + 1, len - 1, len + rnd.nextInt(64), len - rnd.nextInt(64), rnd.nextInt(),
            ReceiverHarness.MAX_FRAME + 1, Integer.MAX_VALUE, 0, 7};
        ByteBuffer.wrap(f).putInt(0, choices[rnd.nextInt(choices.length)]);
      }
      case 4 -> f[rnd.nextInt(f.length)] = (byte) rnd.nextInt(); // overwrite a byte
      case 5 -> { // insert bytes
        int at = rnd.nextInt(f.length + 1);
        byte[] ins = new byte[1 + rnd.nextInt(8)];
        rnd.nextBytes(ins);
        byte[] out = new byte[f.length + ins.length];
        System.arraycopy(f, 0, out, 0, at);
        System.arraycopy(ins, 0, out, at, ins.length);
        System.arraycopy(f, at, out, at + ins.length, f.length - at);
        f = out;
      }
      case 6 -> { // a second frame after the first
        TcpFrame next = randomFrame(rnd, h);
        byte[] g = ReceiverHarness.encode(next);
        ReferenceCountUtil.release(next);
        byte[] out = Arrays.copyOf(f, f.length + g.length);
        System.arraycopy(g, 0, out, f.length, g.length);
        f = out;
      }
      default -> f[4 + rnd.nextInt(4)] = (byte) rnd.nextInt(); // magic, version or type
    }
    return f;
  }

  private static List<String> describe(List<TcpFrame> replies) {
    List<String> out = new ArrayList<>();
    for (TcpFrame f : replies) {
      if (f instanceof Ack a) {
        out.add("ACK " + a.seq() + " " + a.value());
      } else if (f instanceof ErrorReply e) {
        out.add("ERROR " + e.seq() + " " + TransportError.fromCode(e.code()));
      } else {
        fail("receiver replied with " + f.type());
      }
    }
    return out;
  }

  // ---------------------------------------------------------------- the model

  /** What a correct receiver does with the input: region bytes, replies, whether it stays open. */
  private static final class Model {
    final long id;
    final long key;
    final byte[] region;
    final List<String> replies = new ArrayList<>();
    boolean open = true;
    private boolean skipping;
    private long skippedSeq;

    Model(ReceiverHarness h) {
      id = h.d.id();
      key = h.d.key();
      region = h.regionBytes();
    }

    void run(byte[] input, boolean endOfStream) {
      ByteBuf in = Unpooled.wrappedBuffer(input);
      try {
        while (open) {
          TcpFrame f;
          try {
            f = TcpFrameDecoder.decodeFrame(in, ReceiverHarness.MAX_FRAME);
          } catch (TransportException e) {
            closeWith(e.error());
            return;
          }
          if (f == null) {
            if (endOfStream) {
              if (in.isReadable()) {
                closeWith(TransportError.MALFORMED);
              } else {
                open = false;
              }
            }
            return;
          }
          try {
            apply(f);
          } finally {
            ReferenceCountUtil.release(f);
          }
        }
      } finally {
        in.release();
      }
    }

    private void closeWith(TransportError e) {
      replies.add("ERROR 0 " + e);
      open = false;
    }

    /** The first failing check, as the receiver orders them, or null. */
    private TransportError check(Target t, long length, boolean atomic) {
      if (t.regionId() != id) {
        return TransportError.UNKNOWN_REGION;
      }
      if (t.key() != key) {
        return TransportError.BAD_KEY;
      }
      long off = t.offset();
      if (off < 0 || length < 0 || off > REGION || length > REGION - off) {
        return TransportError.OUT_OF_RANGE;
      }
      return atomic && (off & 7) != 0 ? TransportError.MISALIGNED : null;
    }

    private long addSignal(long offset, long delta) {
      ByteBuffer b = ByteBuffer.wrap(region).order(ByteOrder.LITTLE_ENDIAN);
      long old = b.getLong((int) offset);
      b.putLong((int) offset, old + delta);
      return old;
    }

    private void write(long seq, Target dst, long length, long partOffset, ByteBuf payload, Target sig, long delta) {
      boolean last = partOffset + payload.readableBytes() == length;
      if (skipping && seq == skippedSeq) {
        skipping = !last;
        return;
      }
      TransportError e = check(dst, length, false);
      if (e == null && sig != null) {
        e = check(sig, 8, true);
      }
      if (e != null) {
        skipping = !last;
        skippedSeq = seq;
        replies.add("ERROR " + seq + " " + e);
        return;
      }
      payload.getBytes(payload.readerIndex(), region, (int) (dst.offset() + partOffset), payload.readableBytes());
      if (last) {
        if (sig != null) {
          addSignal(sig.offset(), delta);
        }
        replies.add("ACK " + seq + " 0");
      }
    }

    private void atomic(long seq, Target t, long delta, boolean returnOld) {
      TransportError e = check(t, 8, true);
      if (e != null) {
        replies.add("ERROR " + seq + " " + e);
      } else {
        long old = addSignal(t.offset(), delta);
        replies.add("ACK " + seq + " " + (returnOld ? old : 0));
      }
    }

    private void apply(TcpFrame f) {
      if (f instanceof Write w) {
        write(w.seq(), w.dst(), w.length(), w.partOffset(), w.payload(), null, 0);
      } else if (f instanceof WriteSignal w) {
        write(w.seq(), w.dst(), w.length(), w.partOffset(), w.payload(), w.signal(), w.delta());
      } else if (f instanceof Signal s) {
        atomic(s.seq(), s.signal(), s.delta(), false);
      } else if (f instanceof FetchAdd a) {
        atomic(a.seq(), a.dst(), a.delta(), true);
      } else if (f instanceof Send s) {
        replies.add("ACK " + s.seq() + " 0");
      } else { // a second HELLO, or a reply sent to the receiver
        closeWith(TransportError.MALFORMED);
      }
    }
  }
}
