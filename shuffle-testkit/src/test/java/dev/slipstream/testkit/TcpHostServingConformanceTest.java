package dev.slipstream.testkit;

/** The host block writer over the tcp transport (127.0.0.1). */
class TcpHostServingConformanceTest extends ServingConformanceSuite {
  @Override
  protected ServingRig newRig() throws Exception {
    return new HostRig("tcp");
  }
}
