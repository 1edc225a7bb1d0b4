package dev.slipstream.gpu;

import dev.slipstream.core.transport.TransportException;
import dev.slipstream.gpu.nic.NicDevice;
import dev.slipstream.gpu.nic.NicLanding;
import dev.slipstream.gpu.nic.NicQpRecord;
import java.util.ArrayList;
import java.util.List;

/**
 * An executor GPU's RDMA NIC through the native library (slipstream/gpunetio_nic.h): the device,
 * port and protection domain, the regions registered on it once, and links towards peers. Which
 * implementation the build has is {@link #implementation} ("mlx5": slipstream's host side on
 * rdma-core's mlx5 direct verbs; "doca": the DOCA GPUNetIO host library; "none").
 *
 * <p>Owns its native handle: {@link #close} after every link it made is closed. Thread-safe for
 * distinct links; {@link #register} and {@link #createLink} may be called from any thread.
 */
public final class NativeNic implements NicDevice, dev.slipstream.gpu.shuffle.NicRegistrar, AutoCloseable {
  /** Who rings a queue pair's doorbell (the native SLIP_NIC_DOORBELL_* values). */
  public enum Doorbell {
    AUTO,
    HOST,
    GPU
  }

  /** Device name of the software NIC (slipstream/gpunetio_nic.h): links between executors of one machine. */
  public static final String SOFTWARE = "softnic";

  private final String name;
  private final String kind;
  private long handle;

  private NativeNic(String name, long handle) {
    this.name = name;
    this.handle = handle;
    this.kind = SlipNative.nicKindOf(handle);
  }

  /** "mlx5", "doca" or "none". */
  public static String implementation() {
    NativeLibrary.load();
    return SlipNative.nicImplementation();
  }

  /** Null when this build has a NIC implementation whose libraries load here, else why not. */
  public static String unavailable() {
    try {
      NativeLibrary.load();
    } catch (RuntimeException e) {
      return e.getMessage();
    }
    return SlipNative.nicUnavailable();
  }

  /**
   * Opens {@code ibdev} ("" for the first mlx5 device), {@code port}, GID index {@code gidIndex}
   * (RoCE), for CUDA device {@code device}; a {@link GpuException} (SLIP_ERR_NO_DEVICE) names the
   * device and what was found when it is absent.
   */
  public static NativeNic open(String ibdev, int port, int gidIndex, int device, Doorbell doorbell) {
    NativeLibrary.load();
    return new NativeNic(ibdev.isEmpty() ? "the first mlx5 device" : ibdev,
        SlipNative.nicOpen(ibdev, port, gidIndex, device, doorbell.ordinal()));
  }

  /** The native parser's verdict on a record: null when it accepts it, else its error text. */
  static String nativeRefusal(byte[] record) {
    NativeLibrary.load();
    return SlipNative.nicRecordRefusal(record);
  }

  /** Registers device or host memory at iova {@code id << 40}; returns its memory key. */
  @Override
  public synchronized int register(long pointer, long length, int id) {
    return SlipNative.nicRegister(live(), pointer, length, id);
  }

  /**
   * Registers {@code length} bytes of host memory at {@code hostPointer} that map {@code file} from
   * its first byte and are registered with this process's GPU (a request ring's native mapping,
   * {@link RemoteRing}); returns its memory key. A ConnectX NIC registers the memory as it is; the
   * software NIC's peers map the file.
   */
  public synchronized int registerFile(long hostPointer, long length, int id, java.nio.file.Path file) {
    return SlipNative.nicRegisterFile(live(), hostPointer, length, id, file.toString());
  }

  /**
   * Queue pair {@code q} of {@code link} (made by this NIC) as the host posts on it; the link must
   * outlive it, and no queue set may use that queue pair.
   */
  public HostQueue hostQueue(Link link, int q) {
    if (!(link instanceof NativeLink l) || l.owner() != this) {
      throw new IllegalArgumentException("host queue of " + link + ", expected a link this NIC (" + name + ") made");
    }
    if (q < 0 || q >= l.queues) {
      throw new IllegalArgumentException("NIC " + name + ": queue pair " + q + " of a link of " + l.queues);
    }
    return new HostQueue(l.open(), q, "NIC " + name);
  }

  /**
   * Removes registration ({@code id}, {@code mkey}); WQEs naming it later complete with an error.
   * Only once no queue pair has WQEs in flight that name it.
   */
  @Override
  public synchronized void deregister(int id, int mkey) {
    SlipNative.nicDeregister(live(), id, mkey);
  }

  /** "mlx5", "doca" or "softnic" (the software NIC, device name {@value #SOFTWARE}). */
  public String kind() {
    return kind;
  }

  /** Whether this is the software NIC, which reaches executors of its own machine only. */
  public boolean software() {
    return SOFTWARE.equals(kind());
  }

  @Override
  public synchronized Link createLink(int queues, int depth) {
    return new NativeLink(SlipNative.nicLink(live(), queues, depth), queues);
  }

  @Override
  public synchronized void close() {
    if (handle != 0) {
      SlipNative.closeNic(handle);
      handle = 0;
    }
  }

  @Override
  public String toString() {
    return "NativeNic[" + name + ", " + kind + "]";
  }

  private long live() {
    if (handle == 0) {
      throw new IllegalStateException("NIC " + name + " is closed");
    }
    return handle;
  }

  /** The queue pairs towards one peer. */
  private final class NativeLink implements Link {
    private final int queues;
    private long link;

    NativeLink(long link, int queues) {
      this.link = link;
      this.queues = queues;
    }

    NativeNic owner() {
      return NativeNic.this;
    }

    @Override
    public synchronized List<NicQpRecord> records() {
      List<NicQpRecord> out = new ArrayList<>(queues);
      for (int q = 0; q < queues; q++) {
        try {
          out.add(NicQpRecord.decode(SlipNative.nicRecord(open(), q)));
        } catch (TransportException e) {
          throw new IllegalStateException("NIC " + name + " made a record its own codec refuses: " + e.getMessage(), e);
        }
      }
      return out;
    }

    @Override
    public synchronized void connect(int q, NicQpRecord peer) {
      SlipNative.nicConnect(open(), q, peer.encode(), "NIC " + name + ": queue pair " + q + " to " + peer);
    }

    @Override
    public synchronized boolean gpuDoorbell() {
      return SlipNative.nicGpuDoorbell(open());
    }

    @Override
    public synchronized QueueSet queueSet(GpuContext ctx, int first, int count, List<GpuRegion> locals,
        List<NicLanding> peer) {
      if (first < 0 || count < 1 || first + count > queues) {
        throw new IllegalArgumentException("NIC " + name + ": queue pairs " + first + " + " + count + " of a link of "
            + queues + ", expected a range within it");
      }
      return QueueSet.onLink(ctx, open(), first, count, locals, peer);
    }

    @Override
    public synchronized void close() {
      if (link != 0) {
        SlipNative.nicLinkClose(link);
        link = 0;
      }
    }

    private long open() {
      if (link == 0) {
        throw new IllegalStateException("link on NIC " + name + " is closed");
      }
      return link;
    }
  }
}
