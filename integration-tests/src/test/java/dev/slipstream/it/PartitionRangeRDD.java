package dev.slipstream.it;

import org.apache.spark.Dependency;
import org.apache.spark.Partition;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import scala.Product2;
import scala.collection.Iterator;
import scala.collection.immutable.List$;
import scala.collection.immutable.Seq;
import scala.reflect.ClassTag$;

/**
 * Reads a shuffle's partitions in ranges of {@code width}, one range per task, through the shuffle
 * manager's reader, as adaptive execution's coalesced shuffle reads do ({@code ShuffledRowRDD}).
 * With the job's local property {@code __fetch_continuous_blocks_in_batch_enabled} set, a reader
 * may fetch a map output's partitions of the range as one block.
 */
final class PartitionRangeRDD<K, C> extends RDD<Product2<K, C>> {
  private static final long serialVersionUID = 1L;

  private final ShuffleDependency<K, ?, C> dep;
  private final int width;

  /** Over the shuffle that {@code shuffled} reads (its only dependency). */
  @SuppressWarnings("unchecked")
  PartitionRangeRDD(RDD<?> shuffled, int width) {
    super(shuffled, ClassTag$.MODULE$.apply(Product2.class));
    this.dep = (ShuffleDependency<K, ?, C>) shuffled.dependencies().head();
    this.width = width;
  }

  static final class Range implements Partition {
    private static final long serialVersionUID = 1L;
    final int index;
    final int start;
    final int end;

    Range(int index, int start, int end) {
      this.index = index;
      this.start = start;
      this.end = end;
    }

    @Override
    public int index() {
      return index;
    }
  }

  @Override
  public Partition[] getPartitions() {
    int n = dep.partitioner().numPartitions();
    Partition[] out = new Partition[(n + width - 1) / width];
    for (int i = 0; i < out.length; i++) {
      out[i] = new Range(i, i * width, Math.min(n, (i + 1) * width));
    }
    return out;
  }

  @Override
  public Seq<Dependency<?>> getDependencies() {
    return List$.MODULE$.<Dependency<?>>empty().$colon$colon(dep);
  }

  @Override
  public Iterator<Product2<K, C>> compute(Partition split, TaskContext context) {
    Range r = (Range) split;
    return SparkEnv.get().shuffleManager().<K, C>getReader(dep.shuffleHandle(), 0, Integer.MAX_VALUE, r.start, r.end,
        context, context.taskMetrics().createTempShuffleReadMetrics()).read();
  }
}
