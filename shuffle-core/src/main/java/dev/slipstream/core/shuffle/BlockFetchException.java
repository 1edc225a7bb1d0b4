package dev.slipstream.core.shuffle;

import java.io.IOException;

/** A block could not be fetched from its holder; the plugin turns it into a FetchFailedException. */
public final class BlockFetchException extends IOException {
  private static final long serialVersionUID = 1L;

  private final BlockId block;
  private final String holderId;

  public BlockFetchException(BlockId block, String holderId, String message, Throwable cause) {
    super("fetching " + block + " from " + holderId + " failed: " + message, cause);
    this.block = block;
    this.holderId = holderId;
  }

  public BlockId block() {
    return block;
  }

  public String holderId() {
    return holderId;
  }
}
