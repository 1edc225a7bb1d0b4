package dev.slipstream.it;

import java.util.ArrayList;
import java.util.List;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.config.Property;

/**
 * Keeps the messages that loggers under one name prefix write in this JVM (Spark logs through
 * log4j 2 on both lines). Install it after Spark has started: Spark replaces log4j's default
 * configuration when it first logs, which would drop the logger added here.
 */
final class LogCapture extends AbstractAppender implements AutoCloseable {
  private final String loggerName;
  private final List<String> messages = new ArrayList<>();

  private LogCapture(String loggerName) {
    super("capture-" + loggerName, null, null, true, Property.EMPTY_ARRAY);
    this.loggerName = loggerName;
  }

  /** Starts keeping what {@code loggerName} and the loggers below it log at {@code level} or above. */
  static LogCapture install(String loggerName, Level level) {
    LogCapture c = new LogCapture(loggerName);
    c.start();
    LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
    Configuration cfg = ctx.getConfiguration();
    LoggerConfig lc = new LoggerConfig(loggerName, level, true);
    lc.addAppender(c, level, null);
    cfg.addLogger(loggerName, lc);
    ctx.updateLoggers();
    return c;
  }

  @Override
  public synchronized void append(LogEvent event) {
    messages.add(event.getMessage().getFormattedMessage());
  }

  /** What was logged since the last call, and forgets it. */
  synchronized String drain() {
    String all = String.join("\n", messages);
    messages.clear();
    return all;
  }

  @Override
  public void close() {
    LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
    ctx.getConfiguration().removeLogger(loggerName);
    ctx.updateLoggers();
    stop();
  }
}
