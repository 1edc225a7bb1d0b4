package dev.slipstream.core.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.transport.loopback.LoopbackFabric;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A GPU reader keeps listening for a holder's answer past its own fetch deadline when it asks to
 * (the answer is what releases its retained landing range): an answer given after the exchange's
 * timeout still completes a request sent with a longer answer window, and a request without one
 * fails with TIMEOUT naming the window.
 */
class WriteExchangeTest {
  @TempDir Path tmp;
  private final LoopbackFabric fabric = new LoopbackFabric();
  private ShuffleNode holder;
  private ShuffleNode reader;
  private final CountDownLatch answer = new CountDownLatch(1);

  private ShuffleNode node(String name) throws TransportException {
    Map<String, String> m = TestNodes.conf("200ms");
    return TestNodes.on(fabric).node(m, tmp, name);
  }

  @BeforeEach
  void start() throws Exception {
    holder = node("holder");
    reader = node("reader");
    holder.setWriter(MemoryKind.DEVICE, (to, request, received, deadline, outcome) -> new Thread(() -> {
      try {
        answer.await(30, TimeUnit.SECONDS); // the test says when: after the reader's fetch timeout
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      outcome.done(0, new TransportException(TransportError.TIMEOUT, "push failed: still running after 200 ms"
          + " (answered once it ended)"), ServeTimeline.NONE);
    }).start());
  }

  @AfterEach
  void stop() {
    reader.close();
    holder.close();
  }

  @Test
  void anAnswerAfterTheFetchTimeoutStillReachesARequestThatWaitsLonger() throws Exception {
    CompletableFuture<WriteResult> longer = reader.writeExchange().send(holder.localEndpoint(),
        ShuffleNodeTest.deviceRequest(reader, 1, 1), null, Duration.ofSeconds(30));
    CompletableFuture<WriteResult> plain = reader.writeExchange().send(holder.localEndpoint(),
        ShuffleNodeTest.deviceRequest(reader, 2, 1));
    ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
        () -> plain.get(30, TimeUnit.SECONDS));
    assertEquals(TransportError.TIMEOUT, ((TransportException) e.getCause()).error());
    assertTrue(e.getCause().getMessage().endsWith("within 200 ms"), e.getCause().getMessage());
    assertTrue(!longer.isDone(), "still listening past the fetch timeout");
    answer.countDown();
    WriteResult r = longer.get(30, TimeUnit.SECONDS);
    assertEquals(TransportError.TIMEOUT, r.error());
    assertTrue(r.reason().contains("answered once it ended"), r.reason());
  }
}
