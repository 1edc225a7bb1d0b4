package dev.slipstream.core.transport;

/**
 * A transport mechanism found with {@link java.util.ServiceLoader}. Each provider names itself,
 * says whether it can run on this machine (keeping the reason when it cannot), and creates
 * {@link Transport} instances.
 *
 * <p>Threading: implementations are stateless or thread-safe; {@link #probe()} may be called
 * from any thread, any number of times.
 */
public interface TransportProvider {

  /** The name users put in {@code spark.slipstream.transport}, lower case, e.g. {@code "tcp"}. */
  String name();

  /** Whether this provider can create a transport here; when not, the reason. Never throws. */
  Availability probe();

  /**
   * Creates a transport bound to this process.
   *
   * @throws TransportException with {@link TransportError#UNAVAILABLE} when {@link #probe()}
   *     says the provider is unavailable, or when opening it fails.
   */
  Transport create(TransportContext context) throws TransportException;
}
