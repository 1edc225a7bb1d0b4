package dev.slipstream.gpu.shuffle;

import dev.slipstream.core.shuffle.RequestRing;
import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.TransportError;
import dev.slipstream.core.transport.TransportException;
import dev.slipstream.core.wire.WireReader;
import dev.slipstream.core.wire.WireWriter;
import dev.slipstream.gpu.RegionExport;
import dev.slipstream.gpu.nic.NicLanding;
import java.util.Optional;

/**
 * What an executor with a GPU tells the driver (and through it every peer) at registration: which
 * machine it runs on ({@code hostId}: CUDA IPC works only between processes of one machine), which
 * GPU it was given (ordinal, PCI bus id, UUID), its device landing region as registered with its
 * RDMA NIC when it has one ({@code nic}: holders on other machines write into it with GPUNetIO
 * RDMA writes), its device landing region's descriptor (CUDA IPC handle inside), and the shared-memory file its
 * device write requests may be written into by readers of the same machine ({@code requestRing}, a
 * {@link RequestRing}; empty when it takes them over the transport only).
 *
 * <p>The landing descriptor (its CUDA IPC handle and key) and the ring path are for executors of
 * the same machine only: the driver hands other executors {@link #sharedWith the endpoint without
 * them} ({@code landing} empty, no ring), which is all they need to choose the staging path.
 *
 * <p>The NIC landing (region id, memory key, length) goes to every executor: RDMA writes need a
 * connected queue pair as well, which only executors of the application get ({@code NicLinks}).
 *
 * <p>Wire form: a version byte ({@link #VERSION}), then the fields (the NIC landing and the landing
 * each after a presence byte); {@link #decode} checks each and names what was got and what was expected. Immutable.
 */
public record GpuEndpoint(String hostId, int device, String pciBusId, String uuid, Optional<NicLanding> nic,
    Optional<RegionExport> landing, String requestRing) {
  public static final byte VERSION = 4;
  static final int MAX_RING_PATH = 1024;

  /** An endpoint that takes device write requests over the transport only. */
  public GpuEndpoint(String hostId, int device, String pciBusId, String uuid, RegionExport landing) {
    this(hostId, device, pciBusId, uuid, Optional.empty(), Optional.of(landing), "");
  }

  public GpuEndpoint(String hostId, int device, String pciBusId, String uuid, RegionExport landing,
      String requestRing) {
    this(hostId, device, pciBusId, uuid, Optional.empty(), Optional.of(landing), requestRing);
  }

  /** Whether this executor reaches other machines' GPUs through a GPUNetIO NIC. */
  public boolean gpunetio() {
    return nic.isPresent();
  }

  /** This endpoint with its landing region registered with a NIC. */
  public GpuEndpoint withNic(NicLanding n) {
    return new GpuEndpoint(hostId, device, pciBusId, uuid, Optional.of(n), landing, requestRing);
  }
  static final int MAX_HOST_ID = 256;
  static final int MAX_PCI_BUS_ID = 32;
  static final int MAX_UUID = 64;

  public GpuEndpoint {
    if (hostId == null || hostId.isEmpty() || hostId.length() > MAX_HOST_ID) {
      throw new IllegalArgumentException("GPU endpoint: host id '" + hostId + "', expected 1.." + MAX_HOST_ID
          + " characters");
    }
    if (device < 0) {
      throw new IllegalArgumentException("GPU endpoint: device " + device + ", expected >= 0");
    }
    if (pciBusId == null || pciBusId.length() > MAX_PCI_BUS_ID || uuid == null || uuid.length() > MAX_UUID) {
      throw new IllegalArgumentException("GPU endpoint: PCI bus id '" + pciBusId + "' and UUID '" + uuid
          + "', expected at most " + MAX_PCI_BUS_ID + " and " + MAX_UUID + " characters");
    }
    if (landing == null || nic == null) {
      throw new IllegalArgumentException("GPU endpoint: landing " + landing + ", NIC landing " + nic
          + ", expected a value or none for each");
    }
    if (landing.isPresent() && (landing.get().kind() != MemoryKind.DEVICE || landing.get().device() != device)) {
      RegionExport l = landing.get();
      throw new IllegalArgumentException("GPU endpoint: landing region " + Integer.toUnsignedString(l.id())
          + " is " + l.kind() + " memory on device " + l.device() + ", expected DEVICE memory on device " + device);
    }
    if (requestRing == null || (!requestRing.isEmpty() && (requestRing.length() > MAX_RING_PATH
        || !RequestRing.isRingPath(requestRing)))) {
      throw new IllegalArgumentException("GPU endpoint: request ring '" + requestRing + "', expected none or an"
          + " absolute path of at most " + MAX_RING_PATH + " characters to a file named slipstream-ring-<32 hex digits>");
    }
  }

  /** This endpoint with {@code path} as its request ring. */
  public GpuEndpoint withRequestRing(String path) {
    return new GpuEndpoint(hostId, device, pciBusId, uuid, nic, landing, path);
  }

  /**
   * What executor {@code recipient} (its GPU endpoint; null when it has none) may see of this one:
   * all of it on the same machine ({@link #hostId}); elsewhere no landing descriptor and no ring
   * (CUDA IPC handles and landing keys never leave the machine).
   */
  public GpuEndpoint sharedWith(GpuEndpoint recipient) {
    if (recipient != null && recipient.hostId.equals(hostId)) {
      return this;
    }
    return new GpuEndpoint(hostId, device, pciBusId, uuid, nic, Optional.empty(), "");
  }

  public void encode(WireWriter w) {
    w.putByte(VERSION).putString(hostId).putInt(device).putString(pciBusId).putString(uuid)
        .putByte(nic.isPresent() ? 1 : 0);
    nic.ifPresent(n -> w.putInt(n.regionId()).putInt(n.mkey()).putLong(n.length()));
    w.putByte(landing.isPresent() ? 1 : 0);
    landing.ifPresent(l -> w.putBytes(l.encode()));
    w.putString(requestRing);
  }

  public static GpuEndpoint decode(WireReader r) throws TransportException {
    byte v = r.getByte("GPU endpoint version");
    if (v != VERSION) {
      throw new TransportException(TransportError.BAD_VERSION, "GPU endpoint: version " + v + ", expected " + VERSION);
    }
    String host = r.getString("GPU endpoint host id", MAX_HOST_ID * 4);
    int device = r.getInt("GPU endpoint device", 0, Integer.MAX_VALUE);
    String pci = r.getString("GPU endpoint PCI bus id", MAX_PCI_BUS_ID * 4);
    String uuid = r.getString("GPU endpoint UUID", MAX_UUID * 4);
    byte hasNic = r.getByte("GPU endpoint NIC landing presence");
    if (hasNic != 0 && hasNic != 1) {
      throw new TransportException(TransportError.MALFORMED, "GPU endpoint: NIC landing presence byte " + hasNic
          + ", expected 0 (none) or 1 (region id, memory key and length follow)");
    }
    int nicId = hasNic == 1 ? r.getInt("GPU endpoint NIC landing region id") : 0;
    int nicKey = hasNic == 1 ? r.getInt("GPU endpoint NIC landing memory key") : 0;
    long nicLength = hasNic == 1 ? r.getLong("GPU endpoint NIC landing length") : 0;
    byte has = r.getByte("GPU endpoint landing presence");
    if (has != 0 && has != 1) {
      throw new TransportException(TransportError.MALFORMED, "GPU endpoint: landing presence byte " + has
          + ", expected 0 (none) or 1 (a descriptor follows)");
    }
    byte[] desc = has == 1 ? r.getBytes("GPU endpoint landing descriptor", RegionExport.BYTES) : null;
    String ring = r.getString("GPU endpoint request ring", MAX_RING_PATH * 4);
    try {
      return new GpuEndpoint(host, device, pci, uuid,
          hasNic == 1 ? Optional.of(new NicLanding(nicId, nicKey, nicLength)) : Optional.empty(),
          desc == null ? Optional.empty() : Optional.of(RegionExport.decode(desc)), ring);
    } catch (IllegalArgumentException e) {
      throw new TransportException(TransportError.MALFORMED, e.getMessage());
    }
  }
}
