package dev.slipstream.core.transport.tcp;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.core.transport.PeerIdentity;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import io.netty.buffer.ByteBuf;
import java.util.Arrays;
import java.util.Objects;

/**
 * The frames that open a tcp connection: HELLO without authentication; AUTH_HELLO, AUTH_CHALLENGE
 * and AUTH_PROOF with it ({@link TcpAuth}). HELLO and AUTH_HELLO carry the client's
 * {@link PeerIdentity}: its endpoint, application id and executor id. docs/protocol-tcp.md has the
 * layouts.
 *
 * <p>Threading: immutable values.
 */
final class TcpHandshake {
  private TcpHandshake() {}

  /**
   * Fields of the largest identity a valid HELLO carries: a tcp endpoint (name and address at
   * their bounds, no extra bytes: tcp endpoints have none) and both ids at their bounds.
   */
  static final int MAX_IDENTITY_LENGTH = 4 + EndpointDescriptor.MAX_NAME + 4 + EndpointDescriptor.MAX_ADDRESS + 4
      + 2 * (4 + PeerIdentity.MAX_ID_BYTES);
  /** Largest frame accepted before a connection's HELLO: the largest valid HELLO. */
  static final int MAX_FRAME_BEFORE_HELLO = TcpFrame.HEADER_LENGTH + MAX_IDENTITY_LENGTH;

  /** The descriptor codec's encoding of {@code identity}, as HELLO and AUTH_HELLO carry it. */
  static byte[] encode(PeerIdentity identity) {
    WireWriter w = new WireWriter(64);
    identity.encode(w);
    return w.toByteArray();
  }

  private static PeerIdentity decodeIdentity(FrameReader in, String frame) throws TransportException {
    WireReader w = in.restAsWire();
    PeerIdentity id = PeerIdentity.decode(w);
    w.expectEnd(frame);
    return id;
  }

  /** First frame of a connection: who the client is, so the receiver knows who writes. */
  record Hello(PeerIdentity identity) implements TcpFrame {
    public Hello {
      Objects.requireNonNull(identity, "identity");
    }

    /** A HELLO of {@code endpoint} without application and executor id. */
    Hello(EndpointDescriptor endpoint) {
      this(PeerIdentity.of(endpoint));
    }

    EndpointDescriptor endpoint() {
      return identity.endpoint();
    }

    @Override
    public TcpFrameType type() {
      return TcpFrameType.HELLO;
    }

    @Override
    public int fieldsLength() {
      return encode(identity).length;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      out.writeBytes(encode(identity));
    }

    static Hello decode(FrameReader in) throws TransportException {
      return new Hello(decodeIdentity(in, "HELLO frame"));
    }
  }

  /**
   * First frame of an authenticated connection, instead of {@link Hello}: the client's nonce and
   * its identity (what its proof will cover). See {@link TcpAuth}.
   */
  record AuthHello(byte[] clientNonce, PeerIdentity identity) implements TcpFrame {
    public AuthHello {
      TcpAuth.checkLength(clientNonce, TcpAuth.NONCE_LENGTH, "client nonce");
      Objects.requireNonNull(identity, "identity");
    }

    /** An AUTH_HELLO of {@code endpoint} without application and executor id. */
    AuthHello(byte[] clientNonce, EndpointDescriptor endpoint) {
      this(clientNonce, PeerIdentity.of(endpoint));
    }

    EndpointDescriptor endpoint() {
      return identity.endpoint();
    }

    @Override
    public TcpFrameType type() {
      return TcpFrameType.AUTH_HELLO;
    }

    @Override
    public int fieldsLength() {
      return TcpAuth.NONCE_LENGTH + encode(identity).length;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      out.writeBytes(clientNonce).writeBytes(encode(identity));
    }

    static AuthHello decode(FrameReader in) throws TransportException {
      byte[] nonce = in.getFixed("client nonce", TcpAuth.NONCE_LENGTH);
      return new AuthHello(nonce, decodeIdentity(in, "AUTH_HELLO frame"));
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof AuthHello a && Arrays.equals(clientNonce, a.clientNonce) && identity.equals(a.identity);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(clientNonce) * 31 + identity.hashCode();
    }
  }

  /** The receiver's answer to AUTH_HELLO: its nonce and its proof that it holds the secret. */
  record AuthChallenge(byte[] serverNonce, byte[] serverProof) implements TcpFrame {
    static final int FIELDS_LENGTH = TcpAuth.NONCE_LENGTH + TcpAuth.PROOF_LENGTH;

    public AuthChallenge {
      TcpAuth.checkLength(serverNonce, TcpAuth.NONCE_LENGTH, "server nonce");
      TcpAuth.checkLength(serverProof, TcpAuth.PROOF_LENGTH, "server proof");
    }

    @Override
    public TcpFrameType type() {
      return TcpFrameType.AUTH_CHALLENGE;
    }

    @Override
    public int fieldsLength() {
      return FIELDS_LENGTH;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      out.writeBytes(serverNonce).writeBytes(serverProof);
    }

    static AuthChallenge decode(FrameReader in) throws TransportException {
      AuthChallenge c = new AuthChallenge(in.getFixed("server nonce", TcpAuth.NONCE_LENGTH),
          in.getFixed("server proof", TcpAuth.PROOF_LENGTH));
      in.expectEnd();
      return c;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof AuthChallenge c && Arrays.equals(serverNonce, c.serverNonce)
          && Arrays.equals(serverProof, c.serverProof);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(serverNonce) * 31 + Arrays.hashCode(serverProof);
    }
  }

  /** The client's proof that it holds the secret; operations may follow it. */
  record AuthProof(byte[] clientProof) implements TcpFrame {
    static final int FIELDS_LENGTH = TcpAuth.PROOF_LENGTH;

    public AuthProof {
      TcpAuth.checkLength(clientProof, TcpAuth.PROOF_LENGTH, "client proof");
    }

    @Override
    public TcpFrameType type() {
      return TcpFrameType.AUTH_PROOF;
    }

    @Override
    public int fieldsLength() {
      return FIELDS_LENGTH;
    }

    @Override
    public void encodeFields(ByteBuf out) {
      out.writeBytes(clientProof);
    }

    static AuthProof decode(FrameReader in) throws TransportException {
      AuthProof p = new AuthProof(in.getFixed("client proof", TcpAuth.PROOF_LENGTH));
      in.expectEnd();
      return p;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof AuthProof p && Arrays.equals(clientProof, p.clientProof);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(clientProof);
    }
  }}
