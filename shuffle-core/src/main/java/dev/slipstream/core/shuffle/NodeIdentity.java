package dev.slipstream.core.shuffle;

import java.util.Objects;

/**
 * Who a shuffle node is: the application it belongs to and its executor id. Every write request
 * carries the reader's identity; a holder serves only requests of its own application, from
 * executors its {@link PeerDirectory} knows.
 *
 * @param applicationId the application's id (Spark's {@code spark.app.id}); at most 256 characters
 * @param executorId this process's executor id (Spark's {@code "driver"} in local mode); at most 256 characters
 */
public record NodeIdentity(String applicationId, String executorId) {
  /** Longest application or executor id carried on the wire. */
  public static final int MAX_ID = 256;

  public NodeIdentity {
    Objects.requireNonNull(applicationId, "applicationId");
    Objects.requireNonNull(executorId, "executorId");
    if (applicationId.length() > MAX_ID || executorId.length() > MAX_ID) {
      throw new IllegalArgumentException("application id and executor id must be at most " + MAX_ID
          + " characters, got " + applicationId.length() + " and " + executorId.length());
    }
  }

  @Override
  public String toString() {
    return "executor " + executorId + " of " + applicationId;
  }
}
