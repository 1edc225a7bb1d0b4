package dev.slipstream.it;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.NoSuchElementException;
import org.apache.spark.serializer.DeserializationStream;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.util.LongAccumulator;
import scala.Tuple2;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.reflect.ClassTag;

/**
 * A serializer with the narrow contract of the RAPIDS Accelerator's columnar batch serializer:
 * records only through {@code serializeStream} with {@code writeKey} then {@code writeValue}, and
 * back only through {@code deserializeStream}; everything else throws
 * {@link UnsupportedOperationException}. Keys are {@code Integer}s, values {@code String}s.
 *
 * <p>{@link Reads#ITERATOR} reads as RAPIDS' does: only {@code asKeyValueIterator()}, with
 * {@code readKey}, {@code readValue}, {@code readObject} and {@code asIterator()} refused.
 * {@link Reads#KEY_VALUE} offers {@code readKey}/{@code readValue} instead (and Spark's
 * {@code asKeyValueIterator()} on top of them), which Spark's {@code ExternalSorter} needs to read
 * its spills back. A stream writes no header, so the streams of several blocks read as one when
 * {@code relocatable} says they may. Accumulators count the values written and read.
 */
final class StreamOnlySerializer extends Serializer implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final int KEY = 'K';
  private static final int VALUE = 'V';

  /** Which read calls the deserialization streams accept. */
  enum Reads { ITERATOR, KEY_VALUE }

  private final boolean relocatable;
  private final Reads reads;
  private final LongAccumulator valuesWritten;
  private final LongAccumulator valuesRead;

  StreamOnlySerializer(boolean relocatable, Reads reads, LongAccumulator valuesWritten, LongAccumulator valuesRead) {
    this.relocatable = relocatable;
    this.reads = reads;
    this.valuesWritten = valuesWritten;
    this.valuesRead = valuesRead;
  }

  @Override
  public SerializerInstance newInstance() {
    return new Instance();
  }

  @Override
  public boolean supportsRelocationOfSerializedObjects() {
    return relocatable;
  }

  private static UnsupportedOperationException refused(String call) {
    return new UnsupportedOperationException(call + " is not supported: this serializer only writes through "
        + "serializeStream().writeKey/writeValue and reads through deserializeStream()");
  }

  private final class Instance extends SerializerInstance {
    @Override
    public <T> ByteBuffer serialize(T t, ClassTag<T> tag) {
      throw refused("serialize(Object)");
    }

    @Override
    public <T> T deserialize(ByteBuffer bytes, ClassTag<T> tag) {
      throw refused("deserialize(ByteBuffer)");
    }

    @Override
    public <T> T deserialize(ByteBuffer bytes, ClassLoader loader, ClassTag<T> tag) {
      throw refused("deserialize(ByteBuffer, ClassLoader)");
    }

    @Override
    public SerializationStream serializeStream(OutputStream s) {
      return new Out(new DataOutputStream(s));
    }

    @Override
    public DeserializationStream deserializeStream(InputStream s) {
      return new In(new DataInputStream(s));
    }
  }

  private final class Out extends SerializationStream {
    private final DataOutputStream out;
    private boolean keyWritten;

    Out(DataOutputStream out) {
      this.out = out;
    }

    @Override
    public <T> SerializationStream writeKey(T key, ClassTag<T> tag) {
      if (keyWritten) {
        throw new IllegalStateException("writeKey twice without writeValue between");
      }
      if (!(key instanceof Integer k)) {
        throw new IllegalArgumentException("key must be an Integer, got " + (key == null ? "null" : key.getClass()));
      }
      try {
        out.writeByte(KEY);
        out.writeInt(k);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      keyWritten = true;
      return this;
    }

    @Override
    public <T> SerializationStream writeValue(T value, ClassTag<T> tag) {
      if (!keyWritten) {
        throw new IllegalStateException("writeValue without writeKey before it");
      }
      if (!(value instanceof String v)) {
        throw new IllegalArgumentException("value must be a String, got " + (value == null ? "null" : value.getClass()));
      }
      try {
        out.writeByte(VALUE);
        out.writeUTF(v);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      keyWritten = false;
      valuesWritten.add(1);
      return this;
    }

    @Override
    public <T> SerializationStream writeObject(T t, ClassTag<T> tag) {
      throw refused("writeObject");
    }

    @Override
    public <T> SerializationStream writeAll(Iterator<T> it, ClassTag<T> tag) {
      throw refused("writeAll");
    }

    @Override
    public void flush() {
      try {
        out.flush();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    @Override
    public void close() {
      if (keyWritten) {
        throw new IllegalStateException("closed after a key without its value");
      }
      try {
        out.close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  private final class In extends DeserializationStream {
    private final DataInputStream in;

    In(DataInputStream in) {
      this.in = in;
    }

    /** The next key, or null at the end of the stream. */
    private Integer nextKey() throws IOException {
      int tag = in.read();
      if (tag < 0) {
        return null;
      }
      if (tag != KEY) {
        throw new IOException("expected a key tag (" + KEY + ") but read " + tag);
      }
      return in.readInt();
    }

    private String nextValue() throws IOException {
      int tag = in.read();
      if (tag != VALUE) {
        throw new IOException("expected a value tag (" + VALUE + ") but read " + (tag < 0 ? "the end of the stream" : tag));
      }
      String v = in.readUTF();
      valuesRead.add(1);
      return v;
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> T readKey(ClassTag<T> tag) {
      if (reads != Reads.KEY_VALUE) {
        throw refused("readKey");
      }
      try {
        Integer k = nextKey();
        if (k == null) {
          throw new EOFException(); // how Spark's readers see the end of a stream
        }
        return (T) k;
      } catch (IOException e) {
        throw sneaky(e);
      }
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> T readValue(ClassTag<T> tag) {
      if (reads != Reads.KEY_VALUE) {
        throw refused("readValue");
      }
      try {
        return (T) nextValue();
      } catch (IOException e) {
        throw sneaky(e);
      }
    }

    @Override
    public <T> T readObject(ClassTag<T> tag) {
      throw refused("readObject");
    }

    @Override
    public Iterator<Object> asIterator() {
      throw refused("asIterator");
    }

    @Override
    public Iterator<Tuple2<Object, Object>> asKeyValueIterator() {
      if (reads == Reads.KEY_VALUE) {
        return super.asKeyValueIterator();
      }
      return new AbstractIterator<>() {
        private Integer key;
        private boolean done;

        @Override
        public boolean hasNext() {
          if (key == null && !done) {
            try {
              key = nextKey();
            } catch (IOException e) {
              throw new UncheckedIOException(e);
            }
            if (key == null) {
              done = true;
              In.this.close();
            }
          }
          return key != null;
        }

        @Override
        public Tuple2<Object, Object> next() {
          if (!hasNext()) {
            throw new NoSuchElementException();
          }
          try {
            Tuple2<Object, Object> r = new Tuple2<>(key, nextValue());
            key = null;
            return r;
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
      };
    }

    @Override
    public void close() {
      try {
        in.close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  /** Throws a checked exception undeclared: Spark's key-value iterator ends on an EOFException from readKey. */
  @SuppressWarnings("unchecked")
  private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
    throw (E) e;
  }
}
