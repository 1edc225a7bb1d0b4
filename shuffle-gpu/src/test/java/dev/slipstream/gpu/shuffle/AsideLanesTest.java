package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A push lane set aside after a push that failed or passed its deadline holds back its request's
 * answer (and pins) until its stream is idle: the answer a reader gets always means the push stores
 * nothing more. Lanes are fakes here.
 */
class AsideLanesTest {
  private final Map<String, Boolean> idle = new HashMap<>();
  private final List<String> closed = new ArrayList<>();
  private final List<String> answered = new ArrayList<>();
  private final AsideLanes<String> aside = new AsideLanes<>(new AsideLanes.Lanes<>() {
    @Override
    public boolean idle(String lane) {
      Boolean b = idle.get(lane);
      if (b == null) {
        throw new IllegalStateException("CUDA error on " + lane);
      }
      return b;
    }

    @Override
    public void close(String lane) {
      closed.add(lane);
    }
  });

  @Test
  void aRequestIsAnsweredOnlyOnceItsLaneIsIdle() {
    idle.put("a", false);
    idle.put("b", false);
    aside.add("a", () -> answered.add("request 1"));
    aside.add("b", () -> answered.add("request 2"));
    assertEquals(0, aside.reclaim());
    assertEquals(List.of(), answered, "no answer while the kernels may run");
    idle.put("b", true);
    assertEquals(1, aside.reclaim());
    assertEquals(List.of("request 2"), answered);
    assertEquals(List.of("b"), closed);
    assertEquals(1, aside.size());
    assertEquals(1, aside.reclaimed());
  }

  @Test
  void aLaneWithADeviceErrorStaysAsideUntilTheServerCloses() {
    aside.add("broken", () -> answered.add("request 3"));
    assertEquals(0, aside.reclaim());
    assertEquals(1, aside.size());
    aside.closeAll();
    assertEquals(List.of("request 3"), answered, "answered exactly once, at the close");
    assertEquals(List.of("broken"), closed);
    assertEquals(0, aside.reclaim());
    assertEquals(List.of("request 3"), answered);
  }
}
