package dev.slipstream.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkEnv;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import scala.Tuple2;
import scala.Tuple3;

/**
 * One non-empty block of a reduce task's input, as Spark's map-output tracker lists it: where it
 * is, the index of the map that wrote it, its id and its size from the map status.
 */
public record MapBlock(BlockManagerId location, int mapIndex, ShuffleBlockId id, long size) {

  /**
   * The non-empty blocks of partitions {@code [startPartition, endPartition)} of map outputs
   * {@code [startMapIndex, endMapIndex)}, in the tracker's order.
   *
   * @param onlySingleBlocks completes "unexpected block X: " in the error when the tracker lists
   *     anything but a single shuffle block
   */
  public static List<MapBlock> nonEmpty(int shuffleId, int startMapIndex, int endMapIndex, int startPartition,
                                 int endPartition, String onlySingleBlocks) {
    List<MapBlock> out = new ArrayList<>();
    var byExecutor = SparkEnv.get().mapOutputTracker().getMapSizesByExecutorId(
        shuffleId, startMapIndex, endMapIndex, startPartition, endPartition);
    while (byExecutor.hasNext()) {
      Tuple2<BlockManagerId, ? extends scala.collection.Seq<Tuple3<BlockId, Object, Object>>> e = byExecutor.next();
      var blocks = e._2().iterator();
      while (blocks.hasNext()) {
        Tuple3<BlockId, Object, Object> b = blocks.next();
        if (!(b._1() instanceof ShuffleBlockId sb)) {
          throw new IllegalStateException("unexpected block " + b._1() + ": " + onlySingleBlocks);
        }
        long size = (Long) b._2();
        if (size != 0) {
          out.add(new MapBlock(e._1(), (Integer) b._3(), sb, size));
        }
      }
    }
    return out;
  }

  /** This block's fetch failure for Spark's scheduler, which then reruns the map that wrote it. */
  public FetchFailedException fetchFailed(String message, Throwable cause) {
    return new FetchFailedException(location, id.shuffleId(), id.mapId(), mapIndex, id.reduceId(), message, cause);
  }
}
