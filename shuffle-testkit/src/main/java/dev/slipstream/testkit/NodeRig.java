package dev.slipstream.testkit;

import dev.slipstream.core.shuffle.ShuffleNode;

/**
 * The part of a {@link ServingRig} every block writer shares: a holder and a reader node over one
 * transport ({@link RigNodes}), and losing the reader. A subclass sets the writer up on the holder
 * and says what memory it lands in.
 */
public abstract class NodeRig implements ServingRig {
  protected final RigNodes nodes;

  protected NodeRig(String transport) throws Exception {
    this.nodes = new RigNodes(transport);
  }

  @Override
  public ShuffleNode holder() {
    return nodes.holder();
  }

  @Override
  public ShuffleNode reader() {
    return nodes.reader();
  }

  @Override
  public void loseReader() {
    nodes.loseReader();
  }
}
