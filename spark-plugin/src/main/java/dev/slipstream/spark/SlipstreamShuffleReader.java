package dev.slipstream.spark;

import dev.slipstream.core.shuffle.BlockFetchException;
import dev.slipstream.core.shuffle.BlockFetcher;
import dev.slipstream.core.shuffle.DecodeAhead;
import dev.slipstream.core.shuffle.FetchedBlock;
import dev.slipstream.core.shuffle.FetchMetrics;
import dev.slipstream.core.shuffle.MapOutput;
import dev.slipstream.core.shuffle.ShuffleMessages;
import dev.slipstream.spark.adapter.Scala;
import dev.slipstream.spark.rpc.PeerInfo;
import dev.slipstream.spark.shim.SparkShim;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.apache.spark.Aggregator;
import org.apache.spark.InterruptibleIterator;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.io.CompressionCodec$;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.apache.spark.storage.ShuffleBlockBatchId;
import org.apache.spark.util.collection.ExternalSorter;
import scala.Product2;
import scala.Tuple2;

/**
 * Reduce side: reads partitions {@code [startPartition, endPartition)} of map outputs
 * {@code [startMapIndex, endMapIndex)}. Local blocks are read straight from this executor's
 * map-output store; remote blocks are fetched by pull-driven writes into landing memory. Then
 * Spark's own machinery deserializes, aggregates and sorts, as its sort shuffle reader does.
 *
 * <p>Where Spark's own reader would fetch a map output's partitions of the range as one batch
 * block ({@code ShuffleBlockBatchId}: adaptive execution reading a coalesced partition range with
 * {@code spark.sql.adaptive.fetchShuffleBlocksInBatch}, see {@link #batchFetch}), so does this one:
 * the partitions are adjacent in the map output, so they move as one block (one write request
 * entry) and are read as one stream, and the read metrics count them as one block, as Spark's do.
 *
 * <p>A holder that is gone, refuses, or misses the deadline becomes a
 * {@link FetchFailedException}, so Spark recomputes the lost map output. Threading: one task thread.
 */
final class SlipstreamShuffleReader<K, C> implements ShuffleReader<K, C> {
  private final SlipstreamShuffleHandle<K, ?, C> handle;
  private final int startMapIndex;
  private final int endMapIndex;
  private final int startPartition;
  private final int endPartition;
  private final TaskContext context;
  private final ShuffleReadMetricsReporter metrics;
  private final ExecutorRuntime runtime;

  /**
   * Where a block came from, for FetchFailedException (a batch block's names its first
   * partition, as Spark's reader does), and its Spark id for the stream's decompression.
   */
  private record Source(BlockManagerId location, int mapIndex, long mapId, int reduceId,
                        org.apache.spark.storage.BlockId sparkId) {}

  SlipstreamShuffleReader(SlipstreamShuffleHandle<K, ?, C> handle, int startMapIndex, int endMapIndex,
                          int startPartition, int endPartition, TaskContext context,
                          ShuffleReadMetricsReporter metrics, ExecutorRuntime runtime) {
    this.handle = handle;
    this.startMapIndex = startMapIndex;
    this.endMapIndex = endMapIndex;
    this.startPartition = startPartition;
    this.endPartition = endPartition;
    this.context = context;
    this.metrics = metrics;
    this.runtime = runtime;
  }

  @Override
  @SuppressWarnings({"unchecked", "rawtypes"})
  public scala.collection.Iterator<Product2<K, C>> read() {
    ShuffleDependency<K, ?, C> dep = handle.dependency();
    int shuffleId = handle.shuffleId();
    Map<dev.slipstream.core.shuffle.BlockId, Source> sources = new HashMap<>();
    List<dev.slipstream.core.shuffle.BlockId> local = new ArrayList<>();
    Map<BlockManagerId, List<BlockFetcher.RemoteBlock>> remote = new LinkedHashMap<>();
    List<MapBlock> blocks = MapBlock.nonEmpty(shuffleId, startMapIndex, endMapIndex, startPartition, endPartition,
        "Slipstream lists single shuffle blocks in its map statuses and makes batch blocks of them itself");
    List<List<MapBlock>> groups = batchFetch(dep)
        ? batches(blocks, runtime.executorId(), runtime.node().config().maxRequestBytes())
        : blocks.stream().map(List::of).toList();
    for (List<MapBlock> g : groups) {
      MapBlock first = g.get(0);
      long mapId = first.id().mapId();
      int start = first.id().reduceId();
      int end = g.get(g.size() - 1).id().reduceId() + 1;
      long size = 0;
      for (MapBlock b : g) {
        size += b.size();
      }
      var id = new dev.slipstream.core.shuffle.BlockId(shuffleId, mapId, start, end);
      org.apache.spark.storage.BlockId sparkId = id.isBatch()
          ? new ShuffleBlockBatchId(shuffleId, mapId, start, end) : first.id();
      sources.put(id, new Source(first.location(), first.mapIndex(), mapId, start, sparkId));
      if (first.location().executorId().equals(runtime.executorId())) {
        local.add(id);
      } else {
        remote.computeIfAbsent(first.location(), k -> new ArrayList<>()).add(new BlockFetcher.RemoteBlock(id, size));
      }
    }

    List<BlockFetcher.HolderPlan> plan = new ArrayList<>();
    for (Map.Entry<BlockManagerId, List<BlockFetcher.RemoteBlock>> e : remote.entrySet()) {
      Optional<PeerInfo> peer = runtime.peer(e.getKey().executorId());
      if (peer.isEmpty()) {
        var first = e.getValue().get(0).id();
        throw Scala.sneaky(fetchFailed(sources.get(first), "executor " + e.getKey().executorId()
            + " is not in Slipstream's peer table (lost or never registered)", null));
      }
      plan.add(new BlockFetcher.HolderPlan(e.getKey().executorId(), peer.get().endpoint(), e.getValue()));
    }
    BlockFetcher fetcher = runtime.node().newFetcher(shuffleId, plan, new FetchMetrics() {
      @Override
      public void remoteBlockFetched(long bytes) {
        metrics.incRemoteBlocksFetched(1);
        metrics.incRemoteBytesRead(bytes);
      }

      @Override
      public void remoteBytesFetched(long bytes) {
        metrics.incRemoteBytesRead(bytes);
      }

      @Override
      public void localBlockRead(long bytes) {
        metrics.incLocalBlocksFetched(1);
        metrics.incLocalBytesRead(bytes);
      }

      @Override
      public void fetchWaitNanos(long nanos) {
        metrics.incFetchWaitTime(TimeUnit.NANOSECONDS.toMillis(nanos));
      }
    });
    context.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> fetcher.close());

    SerializerManager serializerManager = SparkEnv.get().serializerManager();
    SerializerInstance ser = dep.serializer().newInstance();
    DecodeAhead<Source> ahead = runtime.codecPool() != null
        ? new DecodeAhead<>(runtime.codecPool(), (s, raw) -> serializerManager.wrapStream(s.sparkId(), raw),
            runtime.conf().decodeAheadBytes(), runtime.conf().decodeChunkBytes(), MAX_QUEUED_BLOCKS)
        : null;
    RecordIterator records = new RecordIterator(local, fetcher, sources, serializerManager, ser, ahead);
    context.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> {
      records.closeCurrent();
      if (ahead != null) {
        ahead.close(); // waits for jobs still reading a block, then closes every queued block
        runtime.decodedAhead(ahead.aheadBytes());
      }
      // The reporter Spark hands readers is a temporary one; fold it into the task's metrics
      // (idempotent: it sets from the temporaries), also when the task stops reading early.
      ctx.taskMetrics().mergeShuffleReadMetrics();
    });

    scala.collection.Iterator<Product2<Object, Object>> it =
        new InterruptibleIterator<>(context, (scala.collection.Iterator) Scala.toScala(records));

    scala.collection.Iterator aggregated;
    if (dep.aggregator().isDefined()) {
      Aggregator agg = dep.aggregator().get();
      aggregated = dep.mapSideCombine() ? agg.combineCombinersByKey(it, context) : agg.combineValuesByKey(it, context);
    } else {
      aggregated = it;
    }
    if (dep.keyOrdering().isDefined()) {
      ExternalSorter sorter = SparkShim.sorter(context, Scala.none(), Scala.none(), Scala.some(dep.keyOrdering().get()),
          dep.serializer());
      context.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> sorter.stop());
      return sorter.insertAllAndUpdateMetrics(aggregated);
    }
    return aggregated;
  }

  /** Blocks queued for decoding ahead at most, whatever their size. */
  private static final int MAX_QUEUED_BLOCKS = 64;

  private FetchFailedException fetchFailed(Source s, String message, Throwable cause) {
    if (s == null) {
      return new FetchFailedException(null, handle.shuffleId(), -1L, -1, startPartition, message, cause);
    }
    return new FetchFailedException(s.location(), handle.shuffleId(), s.mapId(), s.mapIndex(), s.reduceId(), message,
        cause);
  }

  /**
   * Whether to fetch each map output's partitions of the range as one batch block: when Spark's
   * own reader would ({@code SortShuffleManager.getReader} and
   * {@code BlockStoreShuffleReader.fetchContinuousBlocksInBatch}). The task asks for it (adaptive
   * execution sets {@code __fetch_continuous_blocks_in_batch_enabled} from
   * {@code spark.sql.adaptive.fetchShuffleBlocksInBatch}) and reads more than one partition; the
   * partitions' streams must read as one: a serializer that can relocate records, and no
   * compression or a codec whose streams concatenate; and no I/O encryption, whose streams do not
   * (SPARK-34790). Spark also keeps single blocks under its old fetch protocol, so the block counts
   * follow it there too.
   */
  private boolean batchFetch(ShuffleDependency<K, ?, C> dep) {
    if (!SortShuffleManager.canUseBatchFetch(startPartition, endPartition, context)) {
      return false;
    }
    SparkConf conf = SparkEnv.get().conf();
    boolean compressed = conf.getBoolean("spark.shuffle.compress", true);
    return dep.serializer().supportsRelocationOfSerializedObjects()
        && (!compressed || CompressionCodec$.MODULE$.supportsConcatenationOfSerializedStreams(
            CompressionCodec$.MODULE$.createCodec(conf)))
        && !conf.getBoolean("spark.shuffle.useOldFetchProtocol", false)
        && !conf.getBoolean("spark.io.encryption.enabled", false);
  }

  /**
   * The blocks grouped into batch blocks: the consecutive blocks of one map output on one executor
   * (the tracker lists a map output's blocks in partition order; the empty ones it leaves out are
   * empty runs between them). A remote batch is cut before it would exceed {@code maxRemoteBytes}
   * (a write request's data), as Spark cuts its batches at its request size; a single block larger
   * than that stays one block, streamed. A remote batch also spans at most the partitions one
   * request's block table has records for. Local batches are not cut, as in Spark.
   */
  static List<List<MapBlock>> batches(List<MapBlock> blocks, String localExecutor, long maxRemoteBytes) {
    List<List<MapBlock>> out = new ArrayList<>();
    List<MapBlock> cur = new ArrayList<>();
    long curBytes = 0;
    for (MapBlock b : blocks) {
      boolean sameRun = !cur.isEmpty() && cur.get(0).id().mapId() == b.id().mapId()
          && cur.get(0).location().equals(b.location());
      boolean local = b.location().executorId().equals(localExecutor);
      boolean full = !local && !cur.isEmpty() && (curBytes + b.size() > maxRemoteBytes
          || b.id().reduceId() - cur.get(0).id().reduceId() >= ShuffleMessages.MAX_TABLE_RECORDS);
      if (!sameRun || full) {
        if (!cur.isEmpty()) {
          out.add(cur);
        }
        cur = new ArrayList<>();
        curBytes = 0;
      }
      cur.add(b);
      curBytes += b.size();
    }
    if (!cur.isEmpty()) {
      out.add(cur);
    }
    return out;
  }

  /**
   * Records of every block: the remote requests go out first, then the local blocks are read,
   * then the remote blocks as they land. Any failure to get a block's bytes becomes a
   * FetchFailedException. With decoding ahead, blocks are queued on {@link DecodeAhead} in that
   * order (remote ones as they land, never waiting while a queued block is ready to read) and
   * their records read from the decoded streams in queue order; a block streamed in chunks, whose
   * stream fetches as it is read, is decoded on this thread when its turn comes.
   */
  private final class RecordIterator implements java.util.Iterator<Object> {
    private final ArrayDeque<dev.slipstream.core.shuffle.BlockId> local;
    private final BlockFetcher fetcher;
    private final Map<dev.slipstream.core.shuffle.BlockId, Source> sources;
    private final SerializerManager serializerManager;
    private final SerializerInstance ser;
    private final DecodeAhead<Source> ahead;
    private scala.collection.Iterator<Tuple2<Object, Object>> current;
    private InputStream currentStream;
    private Source currentSource;
    private boolean started;

    RecordIterator(List<dev.slipstream.core.shuffle.BlockId> local, BlockFetcher fetcher,
                   Map<dev.slipstream.core.shuffle.BlockId, Source> sources,
                   SerializerManager serializerManager, SerializerInstance ser, DecodeAhead<Source> ahead) {
      this.local = new ArrayDeque<>(local);
      this.fetcher = fetcher;
      this.sources = sources;
      this.serializerManager = serializerManager;
      this.ser = ser;
      this.ahead = ahead;
    }

    @Override
    public boolean hasNext() {
      try {
        if (!started) {
          started = true;
          fetcher.start(); // remote holders write while the local blocks are read
        }
        while (current == null || !current.hasNext()) {
          closeCurrent();
          if (!openNext()) {
            context.taskMetrics().mergeShuffleReadMetrics();
            return false;
          }
        }
        return true;
      } catch (Exception e) {
        throw asFetchFailure(e);
      }
    }

    @Override
    public Object next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException();
      }
      try {
        Object r = current.next();
        metrics.incRecordsRead(1);
        return r;
      } catch (Exception e) {
        throw asFetchFailure(e);
      }
    }

    /** A local block's stream and size. */
    private record Opened(InputStream raw, long bytes) {}

    /** A local block's stream, counted as read; a missing or unreadable output is a fetch failure. */
    private Opened openLocal(dev.slipstream.core.shuffle.BlockId id, Source source) {
      MapOutput out = runtime.node().store().retain(id.shuffleId(), id.mapId());
      if (out == null) {
        throw Scala.sneaky(fetchFailed(source, "local map output " + source.sparkId() + " is missing", null));
      }
      try {
        InputStream raw = out.open(id.partition(), id.endPartition());
        long bytes = out.runLength(id.partition(), id.endPartition());
        metrics.incLocalBlocksFetched(1);
        metrics.incLocalBytesRead(bytes);
        return new Opened(raw, bytes);
      } catch (IOException e) {
        throw Scala.sneaky(fetchFailed(source, "reading local block " + source.sparkId() + " failed", e));
      } finally {
        out.release();
      }
    }

    /**
     * Queues blocks while the decode-ahead queue wants more: local ones first, then remote ones
     * that have landed, waiting for one only when nothing is queued.
     */
    private void fill() {
      while (ahead.wantsMore()) {
        if (!local.isEmpty()) {
          var id = local.poll();
          Source s = sources.get(id);
          Opened o = openLocal(id, s);
          ahead.add(s, o.raw(), o.bytes(), true);
          continue;
        }
        if (!fetcher.hasNext()) {
          return;
        }
        FetchedBlock b = ahead.isEmpty() ? fetcher.take() : fetcher.poll();
        if (b == null) {
          return;
        }
        // A block that landed whole is plain memory any thread may read; one streamed in chunks
        // fetches as it is read, on this thread only.
        ahead.add(sources.get(b.id()), b.stream(), b.size(), b.landedView() != null);
      }
    }

    private boolean openNext() {
      if (ahead != null) {
        fill();
        if (ahead.isEmpty()) {
          return false;
        }
        DecodeAhead.Decoded<Source> d;
        try {
          d = ahead.next();
        } catch (IOException e) {
          throw Scala.sneaky(e);
        }
        currentSource = d.source();
        currentStream = d.stream();
        current = ser.deserializeStream(d.stream()).asKeyValueIterator();
        return true;
      }
      InputStream raw;
      if (!local.isEmpty()) {
        var id = local.poll();
        currentSource = sources.get(id);
        raw = openLocal(id, currentSource).raw();
      } else if (fetcher.hasNext()) {
        FetchedBlock b = fetcher.next();
        currentSource = sources.get(b.id());
        raw = b.stream();
      } else {
        return false;
      }
      currentStream = raw;
      // A batch block's partitions are streams one after another, which the checks in batchFetch
      // let the codec and the serializer read as one.
      InputStream wrapped = serializerManager.wrapStream(currentSource.sparkId(), raw);
      current = ser.deserializeStream(wrapped).asKeyValueIterator();
      return true;
    }

    void closeCurrent() {
      if (currentStream != null) {
        try {
          currentStream.close();
        } catch (IOException e) {
          // landing and store streams do not fail on close
        }
        currentStream = null;
      }
      current = null;
    }

    private RuntimeException asFetchFailure(Exception e) {
      for (Throwable t = e; t != null; t = t.getCause()) {
        if (t instanceof FetchFailedException) {
          return Scala.sneaky(e);
        }
        if (t instanceof BlockFetchException bfe) {
          Source s = sources.get(bfe.block());
          return Scala.sneaky(fetchFailed(s != null ? s : currentSource, bfe.getMessage(), bfe));
        }
      }
      return Scala.sneaky(e);
    }
  }
}
