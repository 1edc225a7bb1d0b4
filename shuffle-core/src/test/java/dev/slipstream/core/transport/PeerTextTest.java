package dev.slipstream.core.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.slf4j.Marker;
import org.slf4j.event.Level;
import org.slf4j.helpers.AbstractLogger;
import org.slf4j.helpers.MessageFormatter;

/** Peer strings made safe for logs, and WARN lines rate-limited per key with a count of what was left out. */
class PeerTextTest {

  @Test
  void controlAndNonPrintableCharactersAreEscapedAndPrintableOnesKept() {
    assertEquals("tcp://h:1", PeerText.escape("tcp://h:1"));
    assertEquals("a\\x0aWARN forged line\\x0d\\x1b[31m", PeerText.escape("a\nWARN forged line\r\u001b[31m"));
    assertEquals("back\\\\slash \\x00 \\x7f \\x85", PeerText.escape("back\\slash \u0000 \u007f \u0085"));
    assertEquals("h\u00e9llo \u65e5\u672c", PeerText.escape("h\u00e9llo \u65e5\u672c"), "printable non-ASCII stays");
    assertEquals("\\u2028 \\u202e \\ud83d\\ude00", PeerText.escape("\u2028 \u202e \ud83d\ude00"),
        "line separators, bidi overrides and surrogates are escaped");
    assertEquals("null", PeerText.escape(null));
  }

  @Test
  void longStringsAreCutSayingHowMuchWasLeftOut() {
    String s = "x".repeat(1000);
    String e = PeerText.escape(s);
    assertEquals("x".repeat(PeerText.MAX_CHARS) + "...(744 more chars)", e);
    assertEquals("abc...(3 more chars)", PeerText.escape("abc\n\n\n", 3));
    String control = "\u0001".repeat(300);
    assertEquals("\\x01".repeat(256) + "...(44 more chars)", PeerText.escape(control),
        "the cut counts the peer's characters, not the escaped ones");
  }

  /** A logger that keeps the WARN lines it gets. */
  private static final class Captured extends AbstractLogger {
    final List<String> lines = new ArrayList<>();

    @Override
    protected String getFullyQualifiedCallerName() {
      return null;
    }

    @Override
    protected void handleNormalizedLoggingCall(Level level, Marker marker, String pattern, Object[] args,
                                               Throwable t) {
      lines.add(level + " " + MessageFormatter.basicArrayFormat(pattern, args));
    }

    @Override public boolean isTraceEnabled() { return true; }
    @Override public boolean isTraceEnabled(Marker m) { return true; }
    @Override public boolean isDebugEnabled() { return true; }
    @Override public boolean isDebugEnabled(Marker m) { return true; }
    @Override public boolean isInfoEnabled() { return true; }
    @Override public boolean isInfoEnabled(Marker m) { return true; }
    @Override public boolean isWarnEnabled() { return true; }
    @Override public boolean isWarnEnabled(Marker m) { return true; }
    @Override public boolean isErrorEnabled() { return true; }
    @Override public boolean isErrorEnabled(Marker m) { return true; }
  }

  @Test
  void oneWarnPerKeyPerIntervalThenTheSuppressedCount() {
    Captured log = new Captured();
    AtomicLong now = new AtomicLong(1_000);
    long second = 1_000_000_000L;
    RateLimitedLog limited = new RateLimitedLog(log, 10 * second, now::get);

    assertTrue(limited.warn("10.0.0.1", "refused 10.0.0.1 (1)"));
    for (int i = 2; i <= 5; i++) {
      now.addAndGet(second);
      assertFalse(limited.warn("10.0.0.1", "refused 10.0.0.1 (" + i + ")"));
    }
    assertTrue(limited.warn("10.0.0.2", "refused 10.0.0.2"), "another key has its own interval");
    assertEquals(4, limited.suppressed("10.0.0.1"));
    now.addAndGet(6 * second); // 10 s after the first line
    assertTrue(limited.warn("10.0.0.1", "refused 10.0.0.1 (6)"));
    assertEquals(0, limited.suppressed("10.0.0.1"));
    assertEquals(List.of("WARN refused 10.0.0.1 (1)", "WARN refused 10.0.0.2",
        "WARN refused 10.0.0.1 (6) (4 similar lines for 10.0.0.1 suppressed in the last 10 s)"), log.lines);
  }

  @Test
  void manyKeysCostBoundedMemoryAndAForgottenKeyLogsAgain() {
    Captured log = new Captured();
    RateLimitedLog limited = new RateLimitedLog(log, 1_000_000_000_000L, () -> 0);
    for (int i = 0; i <= RateLimitedLog.MAX_KEYS; i++) {
      assertTrue(limited.warn("peer-" + i, "line " + i));
    }
    assertTrue(limited.warn("peer-0", "line 0 again"), "the eldest key was forgotten");
    assertFalse(limited.warn("peer-" + RateLimitedLog.MAX_KEYS, "x"), "a recent key is still limited");
  }
}
