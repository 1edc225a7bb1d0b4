package dev.slipstream.spark;

import dev.slipstream.core.shuffle.MapOutput;
import dev.slipstream.core.shuffle.MapOutputStore;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.apache.spark.SparkConf;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.buffer.NioManagedBuffer;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.ShuffleBlockBatchId;
import org.apache.spark.storage.ShuffleBlockId;
import scala.Option;

/**
 * Serves Slipstream's map outputs to Spark's block manager, for code that reads shuffle blocks
 * through {@code ShuffleBlockFetcherIterator} instead of {@code ShuffleManager.getReader} because
 * the manager is a {@code SortShuffleManager} (Delta Lake's optimized write, for one). Local
 * lookups and the block transfer service's remote fetches both end here; Slipstream's own reader
 * never does.
 *
 * <p>It extends {@link IndexShuffleBlockResolver} only because {@code SortShuffleManager} declares
 * that type: no index or data file is ever written, so Spark's file-based paths (host-local disk
 * reads, migration at decommission) find nothing to read. A block is copied out of the store into
 * heap memory, so the buffer stays valid however long Spark keeps it.
 *
 * <p>Threading: thread-safe.
 */
final class StoreBlockResolver extends IndexShuffleBlockResolver {
  private final Supplier<MapOutputStore> store;

  StoreBlockResolver(SparkConf conf, Supplier<MapOutputStore> store) {
    super(conf, (BlockManager) null, new ConcurrentHashMap<>());
    this.store = store;
  }

  @Override
  public ManagedBuffer getBlockData(BlockId blockId, Option<String[]> dirs) {
    if (dirs.isDefined()) {
      throw new UnsupportedOperationException("block " + blockId + " of another executor was asked for by its local"
          + " directories, but Slipstream keeps map outputs in its map-output store, not in files there; set"
          + " spark.shuffle.readHostLocalDisk=false (Slipstream sets it unless it was set explicitly)");
    }
    int shuffleId;
    long mapId;
    int start;
    int end;
    if (blockId instanceof ShuffleBlockId b) {
      shuffleId = b.shuffleId();
      mapId = b.mapId();
      start = b.reduceId();
      end = start + 1;
    } else if (blockId instanceof ShuffleBlockBatchId b) {
      shuffleId = b.shuffleId();
      mapId = b.mapId();
      start = b.startReduceId();
      end = b.endReduceId();
    } else {
      throw new IllegalArgumentException("Slipstream holds shuffle blocks (ShuffleBlockId or ShuffleBlockBatchId), got "
          + blockId + " (" + blockId.getClass().getSimpleName() + ")");
    }
    MapOutput out = store.get().retain(shuffleId, mapId);
    if (out == null) {
      // Spark's file-based resolver fails the same way (a missing file) and the reader turns it into a FetchFailed.
      throw new IllegalStateException(new IOException("no map output " + shuffleId + "/" + mapId
          + " in this executor's Slipstream store (block " + blockId + ")"));
    }
    try {
      if (start < 0 || end > out.numPartitions() || start >= end) {
        throw new IllegalArgumentException("block " + blockId + " asks for partitions [" + start + ", " + end
            + "), map output " + shuffleId + "/" + mapId + " has [0, " + out.numPartitions() + ")");
      }
      long total = 0;
      for (int p = start; p < end; p++) {
        total += out.partitionLength(p);
      }
      if (total > Integer.MAX_VALUE - 8) {
        throw new IllegalStateException("block " + blockId + " is " + total + " bytes, more than one buffer of at most "
            + (Integer.MAX_VALUE - 8) + " bytes holds");
      }
      ByteBuffer copy = ByteBuffer.allocate((int) total);
      for (int p = start; p < end; p++) {
        for (ByteBuffer b : out.slices(p, 0, out.partitionLength(p))) {
          copy.put(b.duplicate());
        }
      }
      copy.flip();
      return new NioManagedBuffer(copy);
    } catch (IOException e) {
      throw new IllegalStateException("reading block " + blockId + " from the Slipstream store: " + e.getMessage(), e);
    } finally {
      out.release();
    }
  }

  @Override
  public void removeDataByMap(int shuffleId, long mapId) {
    store.get().removeMapOutput(shuffleId, mapId);
  }
}
