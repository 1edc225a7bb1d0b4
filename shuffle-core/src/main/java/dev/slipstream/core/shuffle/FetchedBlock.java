package dev.slipstream.core.shuffle;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;

/**
 * A block a {@link BlockFetcher} handed out; its stream is valid until the fetcher's next {@code next()} or
 * {@code close()}.
 */
public interface FetchedBlock {
  BlockId id();

  String holderId();

  /** The size the map status gave, or the real one where it was known when the block was handed out. */
  long size();

  /**
   * The block's real length in bytes, as its holder reported it: for a block streamed in chunks,
   * known once its first chunk has landed (fetched now, with the fetch deadline, if not yet).
   */
  default long exactSize() throws IOException {
    return size();
  }

  InputStream stream();

  /**
   * The whole block as a read-only view of the landing region when it landed in one request
   * (checked against its checksum when checksums are on), else null. Valid as long as the block's
   * stream; reading it consumes nothing: close the stream to release the space.
   */
  default ByteBuffer landedView() {
    return null;
  }
}
