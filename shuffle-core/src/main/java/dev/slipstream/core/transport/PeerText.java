package dev.slipstream.core.transport;

/**
 * Text a peer supplied (an endpoint address, an executor or application id, an error message),
 * made safe for a log line: control and non-ASCII characters escaped, at most {@link #MAX_CHARS}
 * characters kept, so a hostile peer can neither forge log lines nor flood them.
 */
public final class PeerText {
  /** Characters kept of a peer's text; the rest is replaced by a count. */
  public static final int MAX_CHARS = 256;

  private PeerText() {}

  /** {@code text} escaped (newlines as {@code \n}, other non-printables as {@code \\uXXXX}) and truncated. */
  public static String of(Object text) {
    String s = String.valueOf(text);
    int n = Math.min(s.length(), MAX_CHARS);
    StringBuilder b = new StringBuilder(n + 16);
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      if (c == '\n') {
        b.append("\\n");
      } else if (c == '\r') {
        b.append("\\r");
      } else if (c == '\t') {
        b.append("\\t");
      } else if (c == '\\') {
        b.append("\\\\");
      } else if (c < 0x20 || c > 0x7e) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    if (s.length() > n) {
      b.append("...(").append(s.length() - n).append(" more characters)");
    }
    return b.toString();
  }
}
