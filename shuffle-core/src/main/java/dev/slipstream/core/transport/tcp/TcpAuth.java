package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.PeerIdentity;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Mutual challenge-response authentication of tcp connections with a shared secret (Spark's
 * {@code spark.authenticate} secret). The secret never crosses the wire; each side proves it
 * holds it with an HMAC-SHA256 over both sides' fresh nonces, the client's identity (endpoint,
 * application id, executor id) and a direction label, so a proof is good for one connection and
 * one direction only:
 *
 * <pre>
 *   client -> server  AUTH_HELLO(client nonce, client identity)
 *   server -> client  AUTH_CHALLENGE(server nonce, HMAC(secret, "...server" | nc | ns | identity))
 *   client -> server  AUTH_PROOF(HMAC(secret, "...client" | nc | ns | identity)), then operations
 * </pre>
 *
 * The client checks the server's proof before it sends its own or any operation; the server
 * acts on nothing before the client's proof checks. Proofs are compared in constant time
 * ({@link MessageDigest#isEqual}). Both sides bound the handshake with {@link #timeout()}.
 * docs/protocol-tcp.md has the frames.
 *
 * <p>Threading: thread-safe (a new {@link Mac} per proof). Ownership: keeps its own copy of the
 * secret.
 */
final class TcpAuth {
  static final int NONCE_LENGTH = 32;
  static final int PROOF_LENGTH = 32;
  static final String ALGORITHM = "HmacSHA256";
  /**
   * Largest frame accepted before a connection is authenticated: the largest valid AUTH_HELLO
   * (nonce and the largest identity a HELLO carries) fits; nothing larger is buffered for an
   * unauthenticated peer.
   */
  static final int MAX_FRAME_BEFORE_AUTH = TcpFrame.HEADER_LENGTH + NONCE_LENGTH + TcpHandshake.MAX_IDENTITY_LENGTH;
  private static final byte[] SERVER_LABEL = "slipstream-tcp-auth-v1 server proof".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] CLIENT_LABEL = "slipstream-tcp-auth-v1 client proof".getBytes(StandardCharsets.US_ASCII);

  private final SecretKeySpec key;
  private final Duration timeout;
  private final SecureRandom random = new SecureRandom();

  /**
   * @param secret the shared secret (copied)
   * @param timeout how long a handshake may take, on either side
   * @throws IllegalArgumentException if the secret is empty
   */
  TcpAuth(byte[] secret, Duration timeout) {
    if (secret.length == 0) {
      throw new IllegalArgumentException("the shared secret is empty, expected at least one byte");
    }
    this.key = new SecretKeySpec(secret.clone(), ALGORITHM);
    this.timeout = timeout;
    mac(SERVER_LABEL, new byte[NONCE_LENGTH], new byte[NONCE_LENGTH], new byte[0]); // fail now if HMAC is missing
  }

  Duration timeout() {
    return timeout;
  }

  byte[] newNonce() {
    byte[] n = new byte[NONCE_LENGTH];
    random.nextBytes(n);
    return n;
  }

  byte[] serverProof(byte[] clientNonce, byte[] serverNonce, PeerIdentity client) {
    return mac(SERVER_LABEL, clientNonce, serverNonce, TcpHandshake.encode(client));
  }

  byte[] clientProof(byte[] clientNonce, byte[] serverNonce, PeerIdentity client) {
    return mac(CLIENT_LABEL, clientNonce, serverNonce, TcpHandshake.encode(client));
  }

  /** Constant-time comparison of a received proof with the expected one. */
  static boolean matches(byte[] expected, byte[] got) {
    return MessageDigest.isEqual(expected, got);
  }

  // The label, both nonces have fixed lengths and the identity's encoding comes last, so the MAC
  // input is unambiguous.
  private byte[] mac(byte[] label, byte[] clientNonce, byte[] serverNonce, byte[] identity) {
    try {
      Mac m = Mac.getInstance(ALGORITHM);
      m.init(key);
      m.update(label);
      m.update(clientNonce);
      m.update(serverNonce);
      m.update(identity);
      return m.doFinal();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(ALGORITHM + " is not available in this JVM: " + e, e);
    }
  }

  static void checkLength(byte[] b, int length, String what) {
    if (b == null || b.length != length) {
      throw new IllegalArgumentException(what + ": got " + (b == null ? "null" : b.length + " bytes")
          + ", expected " + length + " bytes");
    }
  }

  @Override
  public String toString() {
    return "TcpAuth(" + ALGORITHM + ", timeout " + timeout.toMillis() + "ms)"; // never the secret
  }
}
