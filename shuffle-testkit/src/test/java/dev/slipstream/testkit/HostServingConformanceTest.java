package dev.slipstream.testkit;

/** The host block writer over the loopback transport. */
class HostServingConformanceTest extends ServingConformanceSuite {
  @Override
  protected ServingRig newRig() throws Exception {
    return new HostRig("loopback");
  }
}
