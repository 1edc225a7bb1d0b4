package dev.slipstream.gpu;

import dev.slipstream.core.transport.MemoryKind;
import dev.slipstream.core.transport.RegionDescriptor;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * How a peer process of the same machine maps a region (its CUDA IPC handle or shared-memory
 * name), sent out of band once, in the owner's registration in the peer table: the 192-byte
 * {@code slip_region_desc} of {@code native/include/slipstream/abi.h}, little-endian. A write
 * request names the region by the protocol's descriptor ({@link #descriptor()}); the holder maps
 * the export registered for its reader, never one a request carries. The offsets below are checked
 * against the native library's {@code offsetof}/{@code sizeof} by {@code AbiLayoutTest}.
 *
 * <p>{@link #decode} validates everything a peer could forge before anything is mapped: the size,
 * magic, version, memory kind, length, the device/kind pairing, the shared-memory name, and that
 * reserved bytes are zero. Immutable; equality is by value.
 */
public final class RegionExport {
  public static final int BYTES = 192;
  public static final int MAGIC = 0x534C5052; // "SLPR"
  public static final int VERSION = 1;
  public static final int IPC_HANDLE_BYTES = 64;
  public static final int SHM_NAME_BYTES = 48;

  // Field offsets of slip_region_desc.
  static final int OFF_MAGIC = 0;
  static final int OFF_VERSION = 4;
  static final int OFF_KIND = 6;
  static final int OFF_ID = 8;
  static final int OFF_DEVICE = 12;
  static final int OFF_KEY = 16;
  static final int OFF_LENGTH = 24;
  static final int OFF_OWNER_PID = 32;
  static final int OFF_IPC_HANDLE = 40;
  static final int OFF_SHM_NAME = 104;
  static final int OFF_RESERVED = 152;
  static final int RESERVED_BYTES = 40;

  private final MemoryKind kind;
  private final int id;
  private final int device;
  private final long key;
  private final long length;
  private final long ownerPid;
  private final byte[] ipcHandle;
  private final String shmName;

  public RegionExport(MemoryKind kind, int id, int device, long key, long length, long ownerPid, byte[] ipcHandle,
      String shmName) {
    this.kind = Objects.requireNonNull(kind, "kind");
    this.id = id;
    this.device = device;
    this.key = key;
    this.length = length;
    this.ownerPid = ownerPid;
    this.ipcHandle = ipcHandle == null ? new byte[IPC_HANDLE_BYTES] : ipcHandle.clone();
    this.shmName = shmName == null ? "" : shmName;
    validate();
  }

  /** Field name to {offset, size}, in declaration order, as the C struct declares them. */
  static Map<String, int[]> layout() {
    Map<String, int[]> m = new LinkedHashMap<>();
    m.put("magic", new int[] {OFF_MAGIC, 4});
    m.put("version", new int[] {OFF_VERSION, 2});
    m.put("kind", new int[] {OFF_KIND, 2});
    m.put("id", new int[] {OFF_ID, 4});
    m.put("device", new int[] {OFF_DEVICE, 4});
    m.put("key", new int[] {OFF_KEY, 8});
    m.put("length", new int[] {OFF_LENGTH, 8});
    m.put("owner_pid", new int[] {OFF_OWNER_PID, 8});
    m.put("ipc_handle", new int[] {OFF_IPC_HANDLE, IPC_HANDLE_BYTES});
    m.put("shm_name", new int[] {OFF_SHM_NAME, SHM_NAME_BYTES});
    m.put("reserved", new int[] {OFF_RESERVED, RESERVED_BYTES});
    return m;
  }

  private void validate() {
    String where = "region descriptor " + Integer.toUnsignedString(id);
    if (length <= 0) {
      throw new IllegalArgumentException(where + ": length " + Long.toUnsignedString(length) + ", expected 1.."
          + Long.MAX_VALUE);
    }
    if (ipcHandle.length != IPC_HANDLE_BYTES) {
      throw new IllegalArgumentException(where + ": IPC handle of " + ipcHandle.length + " bytes, expected "
          + IPC_HANDLE_BYTES);
    }
    byte[] name = shmName.getBytes(StandardCharsets.US_ASCII);
    if (kind == MemoryKind.HOST) {
      throw new IllegalArgumentException(where + ": memory kind " + kind.wireId() + " (host memory of one process),"
          + " expected " + MemoryKind.DEVICE.wireId() + " (device) or " + MemoryKind.HOST_SHARED.wireId()
          + " (host shared memory): only those are exported");
    }
    if (kind == MemoryKind.DEVICE) {
      if (device < 0) {
        throw new IllegalArgumentException(where + ": device memory on device " + device + ", expected >= 0");
      }
      if (!shmName.isEmpty()) {
        throw new IllegalArgumentException(where + ": device memory with shared-memory name \"" + shmName
            + "\", expected none");
      }
    } else {
      if (device != -1) {
        throw new IllegalArgumentException(where + ": host memory on device " + device + ", expected -1");
      }
      if (name.length >= SHM_NAME_BYTES || !shmName.startsWith("/slip-") || shmName.indexOf('/', 1) >= 0
          || !StandardCharsets.US_ASCII.newEncoder().canEncode(shmName) || shmName.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(where + ": shared-memory name \"" + shmName + "\", expected \"/slip-...\""
            + " (ASCII, no further '/', at most " + (SHM_NAME_BYTES - 1) + " bytes)");
      }
      if (!allZero(ipcHandle, 0, IPC_HANDLE_BYTES)) {
        throw new IllegalArgumentException(where + ": host memory with a non-zero IPC handle, expected zeros");
      }
    }
  }

  public MemoryKind kind() {
    return kind;
  }

  /** Region id, unsigned 32-bit. */
  public int id() {
    return id;
  }

  public int device() {
    return device;
  }

  public long key() {
    return key;
  }

  public long length() {
    return length;
  }

  public long ownerPid() {
    return ownerPid;
  }

  public byte[] ipcHandle() {
    return ipcHandle.clone();
  }

  public String shmName() {
    return shmName;
  }

  public byte[] encode() {
    ByteBuffer b = ByteBuffer.allocate(BYTES).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(OFF_MAGIC, MAGIC);
    b.putShort(OFF_VERSION, (short) VERSION);
    b.putShort(OFF_KIND, (short) kind.wireId());
    b.putInt(OFF_ID, id);
    b.putInt(OFF_DEVICE, device);
    b.putLong(OFF_KEY, key);
    b.putLong(OFF_LENGTH, length);
    b.putLong(OFF_OWNER_PID, ownerPid);
    b.put(OFF_IPC_HANDLE, ipcHandle);
    b.put(OFF_SHM_NAME, shmName.getBytes(StandardCharsets.US_ASCII));
    return b.array();
  }

  /** Decodes and validates exactly {@value #BYTES} bytes; errors name what was got and expected. */
  public static RegionExport decode(byte[] bytes) {
    Objects.requireNonNull(bytes, "bytes");
    if (bytes.length != BYTES) {
      throw new IllegalArgumentException("region descriptor of " + bytes.length + " bytes, expected " + BYTES);
    }
    ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    int magic = b.getInt(OFF_MAGIC);
    if (magic != MAGIC) {
      throw new IllegalArgumentException(String.format("region descriptor magic 0x%08x, expected 0x%08x", magic, MAGIC));
    }
    int version = Short.toUnsignedInt(b.getShort(OFF_VERSION));
    if (version != VERSION) {
      throw new IllegalArgumentException("region descriptor version " + version + ", expected " + VERSION);
    }
    int id = b.getInt(OFF_ID);
    int kindCode = Short.toUnsignedInt(b.getShort(OFF_KIND));
    MemoryKind kind = null;
    for (MemoryKind k : MemoryKind.values()) {
      if (k.wireId() == kindCode && k != MemoryKind.HOST) {
        kind = k;
      }
    }
    if (kind == null) {
      throw new IllegalArgumentException("region descriptor " + Integer.toUnsignedString(id) + ": memory kind "
          + kindCode + ", expected " + MemoryKind.DEVICE.wireId() + " (device) or " + MemoryKind.HOST_SHARED.wireId()
          + " (host shared memory)");
    }
    if (!allZero(bytes, OFF_RESERVED, RESERVED_BYTES)) {
      throw new IllegalArgumentException("region descriptor " + Integer.toUnsignedString(id) + ": reserved bytes "
          + OFF_RESERVED + ".." + (BYTES - 1) + " are not zero (version " + VERSION + " defines none)");
    }
    int nul = -1;
    for (int i = 0; i < SHM_NAME_BYTES; i++) {
      if (bytes[OFF_SHM_NAME + i] == 0) {
        nul = i;
        break;
      }
    }
    if (nul < 0) {
      throw new IllegalArgumentException("region descriptor " + Integer.toUnsignedString(id)
          + ": shared-memory name is not NUL-terminated within " + SHM_NAME_BYTES + " bytes");
    }
    if (!allZero(bytes, OFF_SHM_NAME + nul, SHM_NAME_BYTES - nul)) {
      throw new IllegalArgumentException("region descriptor " + Integer.toUnsignedString(id)
          + ": bytes after the shared-memory name's NUL are not zero");
    }
    String name = new String(bytes, OFF_SHM_NAME, nul, StandardCharsets.ISO_8859_1);
    byte[] handle = Arrays.copyOfRange(bytes, OFF_IPC_HANDLE, OFF_IPC_HANDLE + IPC_HANDLE_BYTES);
    return new RegionExport(kind, id, b.getInt(OFF_DEVICE), b.getLong(OFF_KEY), b.getLong(OFF_LENGTH),
        b.getLong(OFF_OWNER_PID), handle, name);
  }

  private static boolean allZero(byte[] a, int off, int len) {
    for (int i = off; i < off + len; i++) {
      if (a[i] != 0) {
        return false;
      }
    }
    return true;
  }

  @Override
  public boolean equals(Object o) {
    if (this == o) {
      return true;
    }
    if (!(o instanceof RegionExport)) {
      return false;
    }
    RegionExport d = (RegionExport) o;
    return kind == d.kind && id == d.id && device == d.device && key == d.key && length == d.length
        && ownerPid == d.ownerPid && Arrays.equals(ipcHandle, d.ipcHandle) && shmName.equals(d.shmName);
  }

  @Override
  public int hashCode() {
    return Objects.hash(kind, id, device, key, length, ownerPid, Arrays.hashCode(ipcHandle), shmName);
  }

  /**
   * This region as a write request names it ({@link RegionDescriptor}):
   * its id, length, key, kind and device; no address, since a peer on this machine maps it through
   * its CUDA IPC handle, taken from the owner's registration in the peer table, never from a request.
   */
  public RegionDescriptor descriptor() {
    return new RegionDescriptor(Integer.toUnsignedLong(id), 0L, length, key, kind, device);
  }

  /** Never prints the key: it is the region owner's secret. */
  @Override
  public String toString() {
    return "RegionExport{" + kind + " region " + Integer.toUnsignedString(id) + ", device " + device + ", "
        + length + " bytes, owner pid " + ownerPid + (shmName.isEmpty() ? "" : ", " + shmName) + "}";
  }
}
