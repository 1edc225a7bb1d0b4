package dev.slipstream.core.testing;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.ResourceLeakDetectorFactory;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Fails a test class when Netty's leak detector reported a leaked buffer while (or before) it
 * ran. Netty only logs leaks; this extension records them through a leak-detector factory
 * installed before the first buffer class is initialised (it is registered by ServiceLoader
 * auto-detection, see junit-platform.properties), and after each class forces a collection and
 * an allocation so that leaks of unreachable buffers are reported. It can miss a leak (the
 * collector decides), never invent one.
 *
 * <p>Runs with {@code -Dio.netty.leakDetection.level=paranoid} (the parent POM's argLine).
 */
public final class NettyLeakCheck implements AfterAllCallback {
  private static final ConcurrentLinkedQueue<String> LEAKS = new ConcurrentLinkedQueue<>();

  static {
    ResourceLeakDetectorFactory.setResourceLeakDetectorFactory(new ResourceLeakDetectorFactory() {
      @Override
      @SuppressWarnings("deprecation")
      public <T> ResourceLeakDetector<T> newResourceLeakDetector(Class<T> resource, int samplingInterval, long maxActive) {
        return new RecordingDetector<>(resource, samplingInterval);
      }

      @Override
      public <T> ResourceLeakDetector<T> newResourceLeakDetector(Class<T> resource, int samplingInterval) {
        return new RecordingDetector<>(resource, samplingInterval);
      }
    });
  }

  private static final class RecordingDetector<T> extends ResourceLeakDetector<T> {
    RecordingDetector(Class<?> resource, int samplingInterval) {
      super(resource, samplingInterval);
    }

    @Override
    protected boolean needReport() {
      return true;
    }

    @Override
    protected void reportTracedLeak(String resourceType, String records) {
      LEAKS.add(resourceType + " leaked:" + records);
      super.reportTracedLeak(resourceType, records);
    }

    @Override
    protected void reportUntracedLeak(String resourceType) {
      LEAKS.add(resourceType + " leaked (no records)");
      super.reportUntracedLeak(resourceType);
    }
  }

  @Override
  public void afterAll(ExtensionContext context) throws Exception {
    for (int i = 0; i < 2; i++) {
      // Wait until the collector has processed references (a sentinel is enqueued), then
      // allocate: the detector drains its queue of collected, unreleased buffers on allocation.
      ReferenceQueue<Object> queue = new ReferenceQueue<>();
      WeakReference<Object> sentinel = new WeakReference<>(new Object(), queue);
      System.gc();
      queue.remove(2000);
      sentinel.clear();
      ByteBuf a = PooledByteBufAllocator.DEFAULT.directBuffer(1);
      a.release();
      ByteBuf b = UnpooledByteBufAllocator.DEFAULT.heapBuffer(1);
      b.release();
    }
    List<String> leaks = new ArrayList<>();
    for (String s; (s = LEAKS.poll()) != null; ) {
      leaks.add(s);
    }
    if (!leaks.isEmpty()) {
      throw new AssertionError(leaks.size() + " Netty buffer(s) leaked during or before "
          + context.getDisplayName() + "; first:\n" + leaks.get(0));
    }
  }
}
