package dev.slipstream.spark.adapter;

import java.util.Optional;
import scala.Option;
import scala.PartialFunction;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;

/**
 * The few Scala shapes the plugin meets, written once: options, iterators, partial functions.
 * This package is the only place that adapts Spark's Scala API to Java.
 */
public final class Scala {
  private Scala() {}

  public static <T> Option<T> some(T value) {
    return Option.apply(value);
  }

  @SuppressWarnings("unchecked")
  public static <T> Option<T> none() {
    return (Option<T>) Option.empty();
  }

  public static <T> Optional<T> toJava(Option<T> o) {
    return o.isDefined() ? Optional.ofNullable(o.get()) : Optional.empty();
  }

  /** A Scala iterator over a Java one. */
  public static <T> scala.collection.Iterator<T> toScala(java.util.Iterator<T> it) {
    return new scala.collection.AbstractIterator<T>() {
      @Override
      public boolean hasNext() {
        return it.hasNext();
      }

      @Override
      public T next() {
        return it.next();
      }
    };
  }

  /** Handler of an RPC message; returns false when the message is not for it. */
  @FunctionalInterface
  public interface Handler {
    boolean handle(Object message) throws Exception;
  }

  /**
   * A partial function for RpcEndpoint.receive / receiveAndReply. Both {@code isDefinedAt} and
   * {@code apply} are overridden (only isDefinedAt recurses forever through applyOrElse).
   */
  public static PartialFunction<Object, BoxedUnit> partial(java.util.function.Predicate<Object> accepts, Handler h) {
    return new AbstractPartialFunction<Object, BoxedUnit>() {
      @Override
      public boolean isDefinedAt(Object x) {
        return accepts.test(x);
      }

      @Override
      public BoxedUnit apply(Object x) {
        try {
          h.handle(x);
        } catch (Exception e) {
          throw sneaky(e);
        }
        return BoxedUnit.UNIT;
      }
    };
  }

  /** Rethrows a checked exception (such as FetchFailedException) from code that cannot declare it. */
  public static RuntimeException sneaky(Throwable t) {
    Scala.<RuntimeException>throwAs(t);
    return new IllegalStateException("unreachable");
  }

  @SuppressWarnings("unchecked")
  private static <E extends Throwable> void throwAs(Throwable t) throws E {
    throw (E) t;
  }
}
