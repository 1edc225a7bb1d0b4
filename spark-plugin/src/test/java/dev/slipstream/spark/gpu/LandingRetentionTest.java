package dev.slipstream.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.spark.rpc.RpcMessages;
import org.junit.jupiter.api.Test;

/**
 * Which answers release a retained landing range: the holder's own (it answers only once its push
 * can store nothing more), pushed or refused; not a refusal the driver made up while relaying, nor
 * no answer at all.
 */
class LandingRetentionTest {
  @Test
  void onlyTheHoldersOwnAnswerReleasesARetainedRange() {
    assertTrue(LandingRetention.answeredByHolder(new RpcMessages.DeviceWriteResult(12, true, 4096, "")));
    assertTrue(LandingRetention.answeredByHolder(new RpcMessages.DeviceWriteResult(12, false, 0,
        "device write request 12: push failed: still running after 2000 ms (answered once it ended)")));
    assertFalse(LandingRetention.answeredByHolder(new RpcMessages.DeviceWriteResult(-1, false, 0,
        "executor 3 did not answer a device write request: timeout")), "made up by the driver");
    assertFalse(LandingRetention.answeredByHolder(null), "no answer");
  }
}
