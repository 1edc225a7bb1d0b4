package dev.slipstream.spark;

import dev.slipstream.core.shuffle.MapOutput;
import dev.slipstream.core.shuffle.MapOutputWriter;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import org.apache.spark.shuffle.api.ShuffleMapOutputWriter;
import org.apache.spark.shuffle.api.ShufflePartitionWriter;
import org.apache.spark.shuffle.api.metadata.MapOutputCommitMessage;

/**
 * Spark's map-output writer API over Slipstream's map-output store, so Spark's own
 * {@code ExternalSorter} partitions, combines, serializes and compresses straight into
 * registered memory. Threading: one task thread.
 */
final class StoreMapOutputWriter implements ShuffleMapOutputWriter {
  private final MapOutputWriter out;
  private MapOutput committed;

  StoreMapOutputWriter(MapOutputWriter out) {
    this.out = out;
  }

  @Override
  public ShufflePartitionWriter getPartitionWriter(int reducePartitionId) {
    return new ShufflePartitionWriter() {
      private long written;

      @Override
      public OutputStream openStream() {
        return new FilterOutputStream(out.openPartition(reducePartitionId)) {
          @Override
          public void write(int b) throws IOException {
            out.write(b);
            written++;
          }

          @Override
          public void write(byte[] b, int off, int len) throws IOException {
            out.write(b, off, len);
            written += len;
          }
        };
      }

      @Override
      public long getNumBytesWritten() {
        return written;
      }
    };
  }

  @Override
  public MapOutputCommitMessage commitAllPartitions(long[] checksums) throws IOException {
    committed = out.commit();
    return MapOutputCommitMessage.of(committed.partitionLengths());
  }

  @Override
  public void abort(Throwable error) {
    out.abort();
  }

  MapOutput committed() {
    return committed;
  }
}
