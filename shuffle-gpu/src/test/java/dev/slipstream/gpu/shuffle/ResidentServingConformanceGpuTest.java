package dev.slipstream.gpu.shuffle;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.slipstream.core.shuffle.ShuffleMessages.WriteRequest;
import dev.slipstream.core.shuffle.ShuffleMessages.WriteResult;
import dev.slipstream.core.transport.RegionDescriptor;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.gpu.Backend;
import dev.slipstream.gpu.GpuRegion;
import dev.slipstream.gpu.QueueSet;
import dev.slipstream.gpu.GpuProbe;
import dev.slipstream.gpu.GpuRuntime;
import dev.slipstream.gpu.NativeNic;
import dev.slipstream.gpu.RemoteRing;
import dev.slipstream.gpu.ResidentServer;
import dev.slipstream.gpu.nic.NicDevice;
import dev.slipstream.gpu.nic.NicLanding;
import dev.slipstream.gpu.serve.RingRequests;
import dev.slipstream.gpu.serve.ServeRing;
import dev.slipstream.gpu.serve.ServeRingFile;
import dev.slipstream.testkit.ServingConformanceSuite;
import dev.slipstream.testkit.ServingRig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The serving conformance suite for the resident serving kernel, on one GPU: the holder's device
 * store followed by a {@link ResidentDirectory}, a {@link ResidentServer} serving the reader's
 * ring (a shared-memory file) into the reader's device landing region. Requests go as a reduce
 * task's do with resident serving on: into the ring when they fit it and name the landing region
 * the reader entry was set for, and otherwise, or when the kernel answers that an output is not in
 * its directory, over the transport to the holder's push lanes. So the kernel's own answers are the
 * exact bytes, table and signal, the refusal of a partition outside its output and of a request
 * past its deadline, and every request reported once when the reader is lost; forged or narrowed
 * landing descriptors and unknown outputs are refused the host-driven way, as in a job. Skips with
 * the probe's reason without a GPU.
 */
class ResidentServingConformanceGpuTest extends ServingConformanceSuite {
  @Override
  protected ServingRig newRig() throws Exception {
    GpuProbe p = GpuRuntime.probe();
    assumeTrue(p.available(), p.reason());
    return new ResidentRig(Backend.NVLINK);
  }

  /** The holder's and the reader's software NICs of a rig whose reader is on "another machine". */
  record Nics(NativeNic holder, NativeNic reader) {
    static Nics open() {
      NativeNic h = NativeNic.open(NativeNic.SOFTWARE, 1, 0, 0, NativeNic.Doorbell.AUTO);
      try {
        return new Nics(h, NativeNic.open(NativeNic.SOFTWARE, 1, 0, 0, NativeNic.Doorbell.AUTO));
      } catch (RuntimeException e) {
        h.close();
        throw e;
      }
    }
  }

  static final class ResidentRig extends PushServingConformanceGpuTest.DeviceRig {
    private record Pending(long ticket, WriteRequest req, Duration answerWithin, CompletableFuture<WriteResult> answer) {}

    private final Path dir;
    private final ServeRingFile file;
    private final ResidentServer server;
    private final ResidentDirectory directory;
    private final ConcurrentLinkedQueue<Pending> pending = new ConcurrentLinkedQueue<>();
    /** Tickets whose answer was read from the ring. */
    private final Set<Long> answered = ConcurrentHashMap.newKeySet();
    /** Ring answers the kernel served, and those it refused as not in its directory (sent to push lanes). */
    private final AtomicLong servedByKernel = new AtomicLong();
    private final AtomicLong sentAgain = new AtomicLong();
    private long servedChecked;
    private long sentAgainChecked;
    private final AtomicLong posted = new AtomicLong();
    private final Thread answers;
    private final GpuRegion staging;
    private final QueueSet queues;
    // A reader on "another machine": the two NICs, a link each way, the reader's copy of the ring.
    private final Nics nics;
    private final NicDevice.Link holderLink;
    private final NicDevice.Link readerLink;
    private final RemoteRing readerCopy;
    private final int landingKey;
    private final int stagingKey;
    private volatile boolean readerLost;
    private volatile boolean closed;

    ResidentRig(Backend backend) throws Exception {
      this(backend, null);
    }

    /** A rig whose reader posts from another software NIC's host into the holder's copy of its ring. */
    static ResidentRig remote() throws Exception {
      return new ResidentRig(Backend.GPUNETIO, Nics.open());
    }

    private ResidentRig(Backend backend, Nics nics) throws Exception {
      super(backend, nics == null ? null : nics.holder());
      this.nics = nics;
      Path shm = Path.of("/dev/shm");
      dir = Files.createTempDirectory(Files.isDirectory(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir")),
          "slipstream-resident-conformance");
      file = ServeRingFile.create(dir.resolve("ring"), 64);
      server = ResidentServer.create(outputs.ctx, new ResidentServer.Settings(1, 256, 4, 256, Duration.ofMillis(200),
          Duration.ofNanos(50_000)));
      directory = new ResidentDirectory(outputs.ctx, server, 1 << 20, Duration.ofSeconds(10));
      outputs.store.follow(directory);
      if (nics != null) {
        holderLink = nics.holder().createLink(1, 1024);
        readerLink = nics.reader().createLink(1, 1024);
        holderLink.connect(0, readerLink.records().get(0));
        readerLink.connect(0, holderLink.records().get(0));
        landingKey = nics.reader().register(landing.region().devicePointer(), landing.region().length(),
            landing.region().id());
        staging = GpuRegion.create(outputs.ctx, MemoryKind.DEVICE, server.stagingBytes(), 7);
        stagingKey = nics.holder().register(staging.devicePointer(), staging.length(), staging.id());
        queues = holderLink.queueSet(outputs.ctx, 0, 1, List.of(staging),
            List.of(new NicLanding(landing.region().id(), landingKey, landing.region().length())));
        readerCopy = RemoteRing.create(outputs.ctx, nics.reader(), dir.resolve("reader-copy"), 64, 41);
        int ringKey = server.attachReaderRemote(0, file.path(), nics.holder(), 40, queues, landing.capacity(),
            own().key(), readerCopy.regionId(), readerCopy.key());
        readerCopy.connect(nics.reader().hostQueue(readerLink, 0), 40, ringKey, Duration.ofSeconds(1).toNanos());
      } else if (backend == Backend.GPUNETIO) {
        holderLink = null;
        readerLink = null;
        readerCopy = null;
        landingKey = 0;
        stagingKey = 0;
        // The reader's landing region is this process's own, aliased.
        staging = GpuRegion.create(outputs.ctx, MemoryKind.DEVICE, server.stagingBytes(), 7);
        queues = ResidentServer.nicQueues(outputs.ctx, staging, view);
        server.attachReaderNic(0, file.path(), queues, landing.capacity(), own().key());
      } else {
        holderLink = null;
        readerLink = null;
        readerCopy = null;
        landingKey = 0;
        stagingKey = 0;
        staging = null;
        queues = null;
        server.attachReader(0, file.path(), landing.region().devicePointer(), landing.capacity(), own().key());
      }
      answers = new Thread(this::readAnswers, "resident-rig-answers");
      answers.setDaemon(true);
      answers.start();
    }

    private RegionDescriptor own() {
      return landing.export().descriptor();
    }

    /** Where the reader posts and reads answers: its own copy when the holder is "remote". */
    private ServeRing ring() {
      return readerCopy != null ? readerCopy.ring() : file.ring();
    }

    @Override
    public CompletableFuture<WriteResult> send(WriteRequest req, Duration answerWithin) {
      if (!RingRequests.fits(req) || !req.landing().equals(own())) {
        return super.send(req, answerWithin);
      }
      long ticket = ring().post(RingRequests.request(req, own().key(), System.nanoTime()), answerWithin.toNanos());
      if (ticket < 0) {
        return CompletableFuture.failedFuture(new IllegalStateException("resident rig: the ring is broken",
            ring().publishFailure()));
      }
      posted.incrementAndGet();
      CompletableFuture<WriteResult> f = new CompletableFuture<>();
      pending.add(new Pending(ticket, req, answerWithin, f));
      return f;
    }

    private void readAnswers() {
      while (!closed) {
        boolean any = false;
        for (Pending p : pending) {
          ServeRing.Answer a = ring().poll(p.ticket());
          if (a == null) {
            continue;
          }
          pending.remove(p);
          answered.add(p.ticket());
          any = true;
          if (a.ok()) {
            servedByKernel.incrementAndGet();
          }
          if (RingRequests.notInDirectory(a)) {
            sentAgain.incrementAndGet();
            super.send(p.req(), p.answerWithin()).whenComplete((r, e) -> {
              if (e != null) {
                p.answer().completeExceptionally(e);
              } else {
                p.answer().complete(r);
              }
            });
          } else {
            p.answer().complete(RingRequests.result(p.req().requestId(), a, "holder"));
          }
        }
        if (!any) {
          LockSupport.parkNanos(10_000);
        }
      }
    }

    @Override
    public synchronized void checkServedByTheWriterUnderTest(String what) {
      long served = servedByKernel.get();
      long again = sentAgain.get();
      try {
        if (again != sentAgainChecked || served == servedChecked) {
          throw new AssertionError(what + ": the kernel served " + (served - servedChecked) + " and sent "
              + (again - sentAgainChecked) + " again to push lanes; expected it to serve them all itself");
        }
      } finally {
        servedChecked = served;
        sentAgainChecked = again;
      }
    }

    /** The kernel's answers so far (served or refused), as its counters say. */
    private long kernelAnswered() {
      ResidentServer.Stats st = server.stats();
      return st.served() + st.failed();
    }

    @Override
    public long requestsIn() {
      return posted.get() + super.requestsIn();
    }

    /**
     * Answers read from the ring, and once the reader was lost (its entry cleared and the kernel
     * stopped, so the counters are final) the tickets the kernel never took; plus what the holder's
     * block server ended.
     */
    @Override
    public long requestsEnded() {
      long untaken = readerLost ? posted.get() - kernelAnswered() : 0;
      return answered.size() + untaken + super.requestsEnded();
    }

    /** Answers the kernel counted beyond the tickets answered in the ring, and the block server's. */
    @Override
    public long reportsBeyondFirst() {
      return kernelAnswered() - answered.size() + super.reportsBeyondFirst();
    }

    @Override
    public void loseReader() {
      server.detachReader(0); // the kernel takes nothing more from the ring and has left
      readerLost = true;
      super.loseReader();
    }

    @Override
    public void close() {
      closed = true;
      try {
        answers.join(5_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      pending.forEach(p -> p.answer().completeExceptionally(new IllegalStateException("resident rig closed")));
      outputs.store.follow(null); // revokes every entry: a push still pinning one would fail this
      directory.close();
      server.close(); // deregisters the holder's copy of a remote ring
      if (queues != null) {
        queues.close();
      }
      try {
        if (nics != null) {
          readerCopy.close();
          holderLink.close();
          readerLink.close();
          nics.reader().deregister(landing.region().id(), landingKey);
          nics.holder().deregister(staging.id(), stagingKey);
        }
        if (staging != null) {
          staging.close();
        }
        file.close();
        try (var left = Files.list(dir)) {
          left.forEach(f -> f.toFile().delete());
        }
        Files.deleteIfExists(dir);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
      super.close(); // the store's slabs leave the holder's NIC
      if (nics != null) {
        nics.reader().close();
        nics.holder().close();
      }
    }
  }
}
