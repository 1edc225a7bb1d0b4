package dev.slipstream.testkit;

import dev.slipstream.core.transport.MemoryKind;

/**
 * A rig whose writer writes into host landing memory ({@link RigNodes#hostLanding}); a subclass
 * says where the holder's map outputs come from ({@link #commit}).
 */
public abstract class HostLandingRig extends NodeRig {
  protected HostLandingRig(String transport) throws Exception {
    super(transport);
  }

  @Override
  public MemoryKind kind() {
    return MemoryKind.HOST;
  }

  @Override
  public int[] widths() {
    return new int[0];
  }

  @Override
  public Landing landing(long length) throws Exception {
    return nodes.hostLanding(length);
  }

  @Override
  public void close() throws Exception {
    nodes.close();
  }
}
