package dev.slipstream.spark.shim;

import org.apache.spark.Aggregator;
import org.apache.spark.Partitioner;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.util.collection.ExternalSorter;
import scala.Option;
import scala.math.Ordering;

/** The Spark APIs that differ between the 3.5 and 4.x lines (spark4 build of this class). */
public final class SparkShim {
  private SparkShim() {}

  public static final String LINE = "spark4";

  public static MapStatus mapStatus(BlockManagerId location, long[] sizes, long mapTaskId) {
    return MapStatus$.MODULE$.apply(location, sizes, mapTaskId, 0L);
  }

  public static <K, V, C> ExternalSorter<K, V, C> sorter(TaskContext context, Option<Aggregator<K, V, C>> aggregator,
      Option<Partitioner> partitioner, Option<Ordering<K>> ordering, Serializer serializer) {
    return new ExternalSorter<>(context, aggregator, partitioner, ordering, serializer, new org.apache.spark.shuffle.checksum.RowBasedChecksum[0]);
  }
}
