package dev.slipstream.bench;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.spark.HashPartitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.shuffle.BlockFetchingListener;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.util.LongAccumulator;
import scala.Tuple2;
import scala.Tuple3;

/**
 * Reads a shuffle's blocks the way code does that bypasses the shuffle manager's reader (as
 * Spark's {@code ShuffleBlockFetcherIterator} does): the map-output tracker's block list, local
 * blocks from the block manager, the others from their holder's block transfer service. Compares
 * with what the manager's own reader returned for the same shuffle.
 */
public final class BlockManagerReads {
  private BlockManagerReads() {}

  /** Per reduce partition "index:records:checksum" through each path, and how blocks were reached. */
  public record Result(List<String> viaReader, List<String> viaBlockManager, long localBlocks, long remoteBlocks) {}

  public static Result run(SparkSession spark) {
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    JavaPairRDD<Integer, String> shuffled = jsc.parallelize(List.of(0, 1, 2, 3, 4, 5), 6).flatMapToPair(slice -> {
      Thread.sleep(200); // both single-core executors get map tasks
      List<Tuple2<Integer, String>> out = new ArrayList<>();
      for (int i = slice; i < 30_000; i += 6) {
        out.add(new Tuple2<>(i % 211, "v" + i));
      }
      return out.iterator();
    }).partitionBy(new HashPartitioner(5));
    List<String> viaReader = shuffled.mapPartitionsWithIndex((idx, it) -> {
      long n = 0;
      long sum = 0;
      while (it.hasNext()) {
        Tuple2<Integer, String> t = it.next();
        n++;
        sum += t._1() * 31L + t._2().hashCode();
      }
      return List.of(idx + ":" + n + ":" + sum).iterator();
    }, true).collect();
    ShuffleDependency<?, ?, ?> dep = (ShuffleDependency<?, ?, ?>) shuffled.rdd().dependencies().head();
    int shuffleId = dep.shuffleId();
    Serializer serializer = dep.serializer();
    LongAccumulator local = spark.sparkContext().longAccumulator("local blocks");
    LongAccumulator remote = spark.sparkContext().longAccumulator("remote blocks");
    List<String> viaBlockManager = jsc.parallelize(List.of(0, 1, 2, 3, 4), 5)
        .mapPartitionsWithIndex((idx, it) -> List.of(read(shuffleId, idx, serializer, local, remote)).iterator(), true)
        .collect();
    return new Result(viaReader, viaBlockManager, local.value(), remote.value());
  }

  private static String read(int shuffleId, int reduceId, Serializer serializer, LongAccumulator local,
                             LongAccumulator remote) throws Exception {
    SparkEnv env = SparkEnv.get();
    BlockManager bm = env.blockManager();
    SerializerInstance ser = serializer.newInstance();
    long n = 0;
    long sum = 0;
    // Raw types: the tracker's Seq is scala.collection.Seq on Spark 3.5 and immutable.Seq on 4.x.
    scala.collection.Iterator<?> byExecutor = env.mapOutputTracker().getMapSizesByExecutorId(shuffleId, reduceId);
    while (byExecutor.hasNext()) {
      Tuple2<?, ?> e = (Tuple2<?, ?>) byExecutor.next();
      BlockManagerId where = (BlockManagerId) e._1();
      scala.collection.Iterator<?> blocks = ((scala.collection.Iterable<?>) e._2()).iterator();
      while (blocks.hasNext()) {
        BlockId id = (BlockId) ((Tuple3<?, ?, ?>) blocks.next())._1();
        byte[] bytes;
        if (where.equals(bm.blockManagerId())) {
          local.add(1);
          bytes = readAll(bm.getLocalBlockData(id));
        } else {
          remote.add(1);
          bytes = fetch(bm, where, id);
        }
        var in = ser.deserializeStream(env.serializerManager().wrapStream(id, new ByteArrayInputStream(bytes)))
            .asKeyValueIterator();
        while (in.hasNext()) {
          Tuple2<?, ?> kv = (Tuple2<?, ?>) in.next();
          n++;
          sum += (Integer) kv._1() * 31L + kv._2().hashCode();
        }
      }
    }
    return reduceId + ":" + n + ":" + sum;
  }

  private static byte[] fetch(BlockManager bm, BlockManagerId where, BlockId id) throws Exception {
    CompletableFuture<byte[]> got = new CompletableFuture<>();
    bm.blockStoreClient().fetchBlocks(where.host(), where.port(), where.executorId(), new String[] {id.name()},
        new BlockFetchingListener() {
          @Override
          public void onBlockFetchSuccess(String blockId, ManagedBuffer data) {
            try {
              got.complete(readAll(data));
            } catch (IOException ex) {
              got.completeExceptionally(ex);
            }
          }

          @Override
          public void onBlockFetchFailure(String blockId, Throwable exception) {
            got.completeExceptionally(exception);
          }
        }, null);
    return got.get(60, TimeUnit.SECONDS);
  }

  private static byte[] readAll(ManagedBuffer b) throws IOException {
    try (InputStream in = b.createInputStream()) {
      return in.readAllBytes();
    }
  }
}
