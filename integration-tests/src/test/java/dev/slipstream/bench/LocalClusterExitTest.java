package dev.slipstream.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

class LocalClusterExitTest {
  @Test
  void waitsForProcessesToExitAndNamesThoseThatOutliveTheDeadline() throws Exception {
    Process quick = new ProcessBuilder("sleep", "0.3").start();
    Process slow = new ProcessBuilder("sleep", "30").start();
    try {
      assertEquals(List.of(), LocalCluster.awaitExit(List.of(quick.pid()), 10), "exited within the deadline");
      assertEquals(false, quick.isAlive());
      assertEquals(List.of(slow.pid()), LocalCluster.awaitExit(List.of(quick.pid(), slow.pid()), 1),
          "a gone pid is skipped, a live one past the deadline is named");
    } finally {
      slow.destroyForcibly();
    }
  }
}
