package dev.slipstream.core.transport;

/** Told when a peer's signal has been applied to a registered region. Must not block. */
@FunctionalInterface
public interface SignalListener {
  void onSignal(RegisteredRegion region, long offset, long newValue);
}
