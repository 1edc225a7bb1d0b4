package dev.slipstream.rapids

import ai.rapids.cudf.{BaseDeviceMemoryBuffer, Cuda, DeviceMemoryBuffer, HostMemoryBuffer}
import ai.rapids.cudf.nvcomp.{BatchedLZ4Compressor, BatchedLZ4Decompressor}
import com.nvidia.spark.rapids.Arm.{closeOnExcept, withResource}
import com.nvidia.spark.rapids.RmmRapidsRetryIterator.withRetryNoSplit

/**
 * LZ4 on the GPU for the pieces of Slipstream's RAPIDS exchange (`spark.slipstream.rapids.compression=lz4`),
 * with cudf's nvCOMP bindings: map tasks compress a batch's pieces in one batched call, reducers
 * decompress a group's pieces in one batched call straight into the buffer the group is assembled
 * from. A compressed piece's chunk lengths travel in its host metadata ([[Lz4Piece]]), not in its
 * device bytes, so the reducer needs no copy back to the host to find them and decompresses only
 * what that checked description accounts for.
 *
 * Threading: any task thread; the work is queued on the thread's default stream, as RAPIDS' own.
 */
object DeviceLz4 {
  /** Uncompressed bytes per chunk: nvCOMP's usual LZ4 chunk, which RAPIDS' own shuffle uses too. */
  val ChunkBytes: Int = 64 << 10
  /** Pieces smaller than this stay as they are: a few hundred bytes hardly shrink. */
  val MinPieceBytes: Long = 1L << 10
  /** Most device memory the compressor holds for its intermediate chunks at once. */
  private val MaxIntermediate: Long = 256L << 20

  /**
   * The pieces of `data` at `offsets` of `lengths` bytes, compressed where that makes them smaller:
   * for each piece either a device buffer of its compressed chunks (the caller's, to close) with its
   * descriptor, or `None` where it stays as it is. Every buffer returned is complete when this
   * returns (the caller copies them on another stream). `data` stays the caller's.
   */
  def compress(data: DeviceMemoryBuffer, offsets: Array[Long], lengths: Array[Long])
      : Array[Option[(DeviceMemoryBuffer, Lz4Piece)]] = {
    val picked = lengths.indices.filter(i => lengths(i) >= MinPieceBytes).toArray
    val out = Array.fill[Option[(DeviceMemoryBuffer, Lz4Piece)]](lengths.length)(None)
    if (picked.isEmpty) {
      return out
    }
    // cudf's compressor closes its inputs: slices of `data`, made again by every attempt.
    val compressed = withRetryNoSplit[Array[DeviceMemoryBuffer]] {
      val inputs: Array[BaseDeviceMemoryBuffer] = picked.map(i => data.slice(offsets(i), lengths(i)))
      new BatchedLZ4Compressor(ChunkBytes, MaxIntermediate).compress(inputs, Cuda.DEFAULT_STREAM)
    }
    withResource(compressed) { cs =>
      // Each output leads with its chunks' compressed lengths (8 bytes each): all of them back to
      // the host with one batched copy and one wait, which is also the wait for the compression.
      val chunks = picked.map(i => Lz4Piece.chunksOf(lengths(i), ChunkBytes))
      val heads = chunks.map(_ * 8L)
      val at = heads.scanLeft(0L)(_ + _)
      val sizes = withResource(DeviceMemoryBuffer.allocate(at.last)) { dev =>
        Cuda.multiBufferCopyAsync(at.init.map(dev.getAddress + _), cs.map(_.getAddress), heads, Cuda.DEFAULT_STREAM)
        withResource(HostMemoryBuffer.allocate(at.last)) { h =>
          h.copyFromDeviceBuffer(dev, Cuda.DEFAULT_STREAM)
          Cuda.DEFAULT_STREAM.sync()
          (0L until at.last / 8).map(k => h.getLong(8 * k)).toArray
        }
      }
      closeOnExcept(new scala.collection.mutable.ArrayBuffer[DeviceMemoryBuffer]()) { made =>
        picked.indices.foreach { k =>
          val i = picked(k)
          val c = sizes.slice((at(k) / 8).toInt, (at(k + 1) / 8).toInt)
          val body = cs(k).getLength - heads(k)
          if (c.exists(s => s <= 0 || s > Int.MaxValue) || c.sum != body) {
            throw new IllegalStateException(s"nvCOMP compressed a piece of ${lengths(i)} bytes into ${c.length} " +
              s"chunks of ${c.take(4).mkString("[", ", ", if (c.length > 4) ", ...]" else "]")} bytes, expected " +
              s"lengths from 1 to 2^31 - 1 adding up to the $body bytes it returned")
          }
          val piece = new Lz4Piece(ChunkBytes, lengths(i), c.map(_.toInt))
          if (body + piece.encode().length < lengths(i)) {
            val b = cs(k).slice(heads(k), body)
            made += b
            out(i) = Some((b, piece))
          }
        }
      }
      out
    }
  }

  /**
   * Queues on the default stream the decompression of each `pieces(i)`, landed at device address
   * `from(i)`, into its uncompressed bytes at device address `to(i)`.
   */
  def decompress(pieces: IndexedSeq[Lz4Piece], from: IndexedSeq[Long], to: IndexedSeq[Long]): Unit = {
    val n = pieces.map(_.chunks().length.toLong).sum
    if (n == 0) {
      return
    }
    // Four vectors of n longs, the layout nvCOMP's batched call reads: compressed chunk addresses,
    // output addresses, compressed lengths, uncompressed lengths.
    withResource(HostMemoryBuffer.allocate(32L * n)) { h =>
      var k = 0L
      var maxChunk = 0L
      var total = 0L
      pieces.indices.foreach { i =>
        val p = pieces(i)
        val c = p.chunks()
        var src = from(i)
        c.indices.foreach { j =>
          val u = p.uncompressedChunk(j)
          h.setLong(8 * k, src)
          h.setLong(8 * (n + k), to(i) + j.toLong * p.chunkBytes)
          h.setLong(8 * (2 * n + k), c(j))
          h.setLong(8 * (3 * n + k), u)
          src += c(j)
          maxChunk = math.max(maxChunk, u)
          total += u
          k += 1
        }
      }
      withResource(DeviceMemoryBuffer.allocate(h.getLength)) { vectors =>
        vectors.copyFromHostBuffer(h, Cuda.DEFAULT_STREAM)
        val lz4 = new Decompressor
        val tempBytes = lz4.tempBytes(n, maxChunk, total)
        withResource(DeviceMemoryBuffer.allocate(math.max(tempBytes, 1L))) { temp =>
          val v = vectors.getAddress
          lz4.run(v, v + 16 * n, v + 24 * n, n, temp.getAddress, tempBytes, v + 8 * n, Cuda.DEFAULT_STREAM)
        }
      }
    }
  }

  /**
   * cudf's LZ4 decompressor, called with chunk addresses and lengths from the pieces' descriptors
   * (cudf's own entry point reads them from a header in the device bytes, which these pieces do not carry).
   */
  private final class Decompressor extends BatchedLZ4Decompressor(ChunkBytes) {
    def tempBytes(chunks: Long, maxChunk: Long, total: Long): Long =
      batchedDecompressGetTempSize(chunks, maxChunk, total)

    def run(inAddrs: Long, inSizes: Long, outSizes: Long, chunks: Long, temp: Long, tempBytes: Long,
        outAddrs: Long, stream: Cuda.Stream): Unit =
      batchedDecompressAsync(inAddrs, inSizes, outSizes, chunks, temp, tempBytes, outAddrs, stream.getStream)
  }
}
