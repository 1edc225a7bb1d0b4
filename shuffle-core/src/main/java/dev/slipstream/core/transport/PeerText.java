package dev.slipstream.core.transport;

/**
 * Makes strings that come from peers (endpoint addresses, executor and application ids, error
 * messages) safe to log: control and other non-printable characters become {@code \xNN} (or
 * {@code \\uNNNN} above 0xff), a backslash becomes {@code \\}, and the result is cut at
 * {@link #MAX_CHARS} characters with the number of characters left out. A peer can neither break
 * a log line nor fill the log with one.
 *
 * <p>Threading: stateless.
 */
public final class PeerText {
  /** The most characters of a peer's string that are logged. */
  public static final int MAX_CHARS = 256;

  private PeerText() {}

  /** {@code s} (its {@code toString()}; "null" for null) escaped and cut at {@link #MAX_CHARS}. */
  public static String escape(Object s) {
    return escape(s, MAX_CHARS);
  }

  /** {@code s} escaped and cut at {@code maxChars} characters of the original. */
  public static String escape(Object s, int maxChars) {
    String in = String.valueOf(s);
    int n = Math.min(in.length(), maxChars);
    StringBuilder out = null;
    for (int i = 0; i < n; i++) {
      char c = in.charAt(i);
      boolean plain = c >= 0x20 && c < 0x7f && c != '\\'
          || c >= 0xa0 && !Character.isISOControl(c) && Character.isDefined(c) && !Character.isSurrogate(c)
              && Character.getType(c) != Character.FORMAT && Character.getType(c) != Character.LINE_SEPARATOR
              && Character.getType(c) != Character.PARAGRAPH_SEPARATOR;
      if (plain) {
        if (out != null) {
          out.append(c);
        }
        continue;
      }
      if (out == null) {
        out = new StringBuilder(n + 16).append(in, 0, i);
      }
      if (c == '\\') {
        out.append("\\\\");
      } else if (c <= 0xff) {
        out.append("\\x").append(Character.forDigit(c >> 4, 16)).append(Character.forDigit(c & 0xf, 16));
      } else {
        out.append(String.format("\\u%04x", (int) c));
      }
    }
    String body = out == null ? in.substring(0, n) : out.toString();
    return in.length() > n ? body + "...(" + (in.length() - n) + " more chars)" : body;
  }
}
