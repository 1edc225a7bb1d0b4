package dev.slipstream.core.transport.tcp;

import io.netty.resolver.AddressResolver;
import io.netty.resolver.AddressResolverGroup;
import io.netty.resolver.InetNameResolver;
import io.netty.resolver.InetSocketAddressResolver;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.Promise;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * Looks up the host names of peers' tcp endpoints on threads of its own, never on an event loop
 * (Netty's default resolver calls the blocking {@link InetAddress#getAllByName} on the event
 * loop that connects, stalling every connection of that loop while DNS answers). IP literals
 * never get here: {@link TcpAddress#socketAddress()} parses them. A connection to a host name
 * waits for the lookup, then connects on its event loop; a failed lookup fails the connection.
 *
 * <p>Threading: thread-safe. Ownership: {@link #close()} stops the lookup threads; lookups
 * still asked for then fail.
 */
final class TcpResolver extends AddressResolverGroup<InetSocketAddress> {
  /** Lookup threads at most; idle ones end after a while. */
  static final int THREADS = 2;

  /** A name lookup: {@link InetAddress#getAllByName} in production. */
  @FunctionalInterface
  interface Lookup {
    InetAddress[] lookup(String host) throws UnknownHostException;
  }

  private final ExecutorService threads;
  private final Lookup lookup;

  TcpResolver(ThreadFactory factory, Lookup lookup) {
    ThreadPoolExecutor pool = new ThreadPoolExecutor(THREADS, THREADS, 30, TimeUnit.SECONDS,
        new LinkedBlockingQueue<>(), factory);
    pool.allowCoreThreadTimeOut(true);
    this.threads = pool;
    this.lookup = lookup;
  }

  @Override
  protected AddressResolver<InetSocketAddress> newResolver(EventExecutor executor) {
    return new InetSocketAddressResolver(executor, new InetNameResolver(executor) {
      @Override
      protected void doResolve(String host, Promise<InetAddress> promise) {
        submit(host, promise, all -> all[0]);
      }

      @Override
      protected void doResolveAll(String host, Promise<List<InetAddress>> promise) {
        submit(host, promise, Arrays::asList);
      }
    });
  }

  private <T> void submit(String host, Promise<T> promise, java.util.function.Function<InetAddress[], T> result) {
    try {
      threads.execute(() -> {
        try {
          InetAddress[] all = lookup.lookup(host);
          if (all == null || all.length == 0) {
            promise.tryFailure(new UnknownHostException(host + ": the lookup returned no address"));
          } else {
            promise.trySuccess(result.apply(all));
          }
        } catch (Exception e) {
          promise.tryFailure(e);
        }
      });
    } catch (RejectedExecutionException e) {
      promise.tryFailure(new UnknownHostException("cannot look up " + host + ": the transport is closed"));
    }
  }

  @Override
  public void close() {
    super.close();
    threads.shutdownNow();
  }
}
