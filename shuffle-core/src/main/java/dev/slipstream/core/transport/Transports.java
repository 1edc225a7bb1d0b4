package dev.slipstream.core.transport;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;

/**
 * The transport providers found on the class path with {@link ServiceLoader}, by name.
 *
 * <p>Threading: immutable after construction.
 */
public final class Transports {
  private final Map<String, TransportProvider> providers;

  private Transports(Map<String, TransportProvider> providers) {
    this.providers = providers;
  }

  /** Loads providers visible to {@code loader} (the class's own loader when null). */
  public static Transports load(ClassLoader loader) {
    ClassLoader cl = loader != null ? loader : Transports.class.getClassLoader();
    Map<String, TransportProvider> found = new LinkedHashMap<>();
    for (TransportProvider p : ServiceLoader.load(TransportProvider.class, cl)) {
      found.putIfAbsent(p.name(), p);
    }
    return new Transports(found);
  }

  public List<String> names() {
    return new ArrayList<>(providers.keySet());
  }

  /**
   * The provider called {@code name}.
   *
   * @throws IllegalArgumentException naming the valid providers when there is none of that name
   */
  public TransportProvider get(String name) {
    TransportProvider p = providers.get(name);
    if (p == null) {
      throw new IllegalArgumentException("unknown transport '" + name + "', expected one of " + names());
    }
    return p;
  }

  /** Each provider's probe result, for logs and error messages. */
  public Map<String, Availability> probeAll() {
    Map<String, Availability> out = new LinkedHashMap<>();
    providers.forEach((n, p) -> out.put(n, p.probe()));
    return out;
  }

  /**
   * Creates the named transport.
   *
   * @throws TransportException with {@link TransportError#UNAVAILABLE} and the probe's reason
   */
  public Transport create(String name, TransportContext context) throws TransportException {
    TransportProvider p = get(name);
    Availability a = p.probe();
    if (!a.available()) {
      throw new TransportException(TransportError.UNAVAILABLE, "transport '" + name + "' is unavailable: " + a.reason());
    }
    return p.create(context);
  }
}
