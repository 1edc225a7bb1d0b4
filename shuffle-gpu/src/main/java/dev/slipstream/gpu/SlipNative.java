package dev.slipstream.gpu;

import dev.slipstream.core.transport.MemoryKind;
/**
 * The JNI surface of {@code libslipstream_jni.so} (native/src/jni/slip_jni.cpp): private static
 * natives bound by {@code RegisterNatives} in {@code JNI_OnLoad}, returning {@code slip_status}
 * codes, and package-private wrappers that turn a failing code into a {@link GpuException}
 * carrying the library's per-thread error text. Handles are the native pointers as {@code long}s;
 * the owner classes ({@link GpuContext}, {@link GpuRegion}, {@link RemoteRegion}, {@link QueueSet})
 * keep them and free them exactly once.
 *
 * <p>Threading: the error text is per thread, so each wrapper reads it on the calling thread right
 * after the failing call.
 */
final class SlipNative {
  static final int REGION_DESC_BYTES = 192;

  private SlipNative() {}

  private static native String lastError();

  private static native String statusName(int code);

  private static native int probe(int[] count);

  private static native int gpunetioProbe();

  private static native String abiLayout();

  private static native String nicImpl();

  private static native int nicProbe();

  private static native int nicQpInfoParse(byte[] rec);

  private static native int nicOpen(String ibdev, int port, int gidIndex, int device, int doorbell, long[] out);

  private static native void nicClose(long nic);

  private static native int nicReg(long nic, long ptr, long length, int id, int[] mkey);

  private static native int nicLinkCreate(long nic, int queues, int depth, long[] out);

  private static native void nicLinkDestroy(long link);

  private static native int nicQpInfo(long link, int q, byte[] out);

  private static native int nicConnect(long link, int q, byte[] rec);

  private static native int nicLinkDoorbell(long link);

  private static native int nicDereg(long nic, int id, int mkey);

  private static native String nicKind(long nic);

  private static native int queueSetCreateLink(long ctx, long link, int first, int nqueues, long[] locals,
      long[] peers, long[] out);

  private static native int ctxCreate(int device, long[] out);

  private static native void ctxDestroy(long ctx);

  private static native int regionCreate(long ctx, int kind, long length, int id, long[] out);

  private static native void regionDestroy(long region);

  private static native void regionInfo(long region, long[] info);

  private static native int regionExport(long region, byte[] out);

  private static native int regionDescParse(byte[] buf, int len, byte[] out);

  private static native int remoteImport(long ctx, byte[] desc, long[] out);

  private static native int remoteAlias(long local, long[] out);

  private static native void remoteDestroy(long remote);

  private static native void remoteInfo(long remote, long[] info);

  private static native int remoteCheck(long remote, int id, long key, long offset, long length);

  private static native int queueSetCreate(long ctx, int backend, int nqueues, int depth, long[] locals,
      long[] remotes, long[] out);

  private static native void queueSetDestroy(long qs);

  private static native long queueSetDevice(long qs);

  private static native int queueSetCheck(long qs, boolean clear);


  private static native int queueSetSetLocals(long qs, int first, long[] regions);

  private static native int queueSetStageLocals(long qs, int first, long[] regions, byte[] image, long[] dst);


  private static native int partitionBounds(int[] widths, long rows, int nparts, long[] out);

  private static native int partitionRun(int device, long keys, long rows, int[] widths, long[] cols, int nparts,
      long out, long outCap, long offsets, long counts, long scratch, long scratchBytes, long timeoutMs);

  private static native int serverCreate(long ctx, int readers, int dirSlots, int ctas, int threads, long idleNs,
      long[] out);

  private static native int serverSetReader(long server, int index, long ring, long landing, long landingLen,
      long landingKey);

  private static native int serverSetReaderNic(long server, int index, long ring, long queue, int landingIndex,
      int stagingIndex, long landingLen, long landingKey);

  private static native int serverClearReader(long server, int index);

  private static native int serverPutOutput(long server, int shuffle, long map, long base, long offsets, long counts,
      int nparts, int nicId, int nicKey, long nicOffset, int linkKey);

  private static native int serverRevokeOutput(long server, int shuffle, long map, long timeoutNs);

  private static native int serverStart(long server, boolean onlyIfWork, int[] launched);

  private static native boolean serverResident(long server);

  private static native int serverStop(long server);

  private static native int serverStats(long server, long[] out);

  private static native void serverDestroy(long server);

  private static native int ringAttach(long ctx, String path, long[] out);

  private static native void ringDetach(long ring);

  private static native void ringAck(long ring);

  private static native long ringHost(long ring);

  private static native int serverSetReaderRemote(long server, int index, long ring, long queue, int landingIndex,
      int stagingIndex, long landingLen, long landingKey, int ringId, int ringKey, int mirrorId, int mirrorKey);

  private static native int nicRegFile(long nic, long ptr, long length, int id, String path, int[] mkey);

  private static native int nicHostPost(long link, int q, long[] ops, int n, long timeoutNs);

  private static native int nicHostDrain(long link, int q, long timeoutNs);

  /** Throws the library's error for a failing status, with what the call was doing. */
  private static void check(int code, String what) {
    if (code != 0) {
      SlipStatus st = SlipStatus.of(code);
      throw new GpuException(st, what + ": " + lastError());
    }
  }

  // ---- probe and layout (no GPU needed) ----

  /** Number of usable GPUs, or a {@link GpuException} (SLIP_ERR_NO_DEVICE) with the reason. */
  static int cudaProbe() {
    int[] n = new int[1];
    check(probe(n), "CUDA probe");
    return n[0];
  }

  /**
   * Null when this build of the native library has the gpunetio backend (its host side and the
   * kernels' device side, both compiled with the GPUNetIO device headers), else why not.
   */
  static String gpunetioUnavailable() {
    int st = gpunetioProbe();
    return st == 0 ? null : lastError();
  }

  // ---- gpunetio on a NIC (NativeNic) ----

  /** "mlx5", "doca" or "none": the NIC implementation this build has. */
  static String nicImplementation() {
    return nicImpl();
  }

  /** Null when the NIC implementation and its libraries are there, else why not. */
  static String nicUnavailable() {
    return nicProbe() == 0 ? null : lastError();
  }

  /** The native parser's verdict on a queue-pair record: null when accepted, else its error. */
  static String nicRecordRefusal(byte[] rec) {
    return nicQpInfoParse(rec) == 0 ? null : lastError();
  }

  static long nicOpen(String ibdev, int port, int gidIndex, int device, int doorbell) {
    long[] out = new long[1];
    check(nicOpen(ibdev, port, gidIndex, device, doorbell, out), "RDMA device '" + ibdev + "'");
    return out[0];
  }

  static void closeNic(long nic) {
    nicClose(nic);
  }

  static int nicRegister(long nic, long ptr, long length, int id) {
    int[] k = new int[1];
    check(nicReg(nic, ptr, length, id, k), "NIC registration of region " + Integer.toUnsignedString(id));
    return k[0];
  }

  static long nicLink(long nic, int queues, int depth) {
    long[] out = new long[1];
    check(nicLinkCreate(nic, queues, depth, out), "NIC link of " + queues + " queue pairs");
    return out[0];
  }

  static void nicLinkClose(long link) {
    nicLinkDestroy(link);
  }

  static byte[] nicRecord(long link, int q) {
    byte[] out = new byte[64];
    check(nicQpInfo(link, q, out), "queue-pair record " + q);
    return out;
  }

  static void nicConnect(long link, int q, byte[] peer, String what) {
    check(nicConnect(link, q, peer), what);
  }

  static void nicDeregister(long nic, int id, int mkey) {
    check(nicDereg(nic, id, mkey), "NIC deregistration of region " + Integer.toUnsignedString(id));
  }

  static String nicKindOf(long nic) {
    return nicKind(nic);
  }

  /** {@code peers}: (region id, memory key, length) per peer region. */
  static long createLinkQueueSet(long ctx, long link, int first, int nqueues, long[] locals, long[] peers) {
    long[] out = new long[1];
    check(queueSetCreateLink(ctx, link, first, nqueues, locals, peers, out), "gpunetio queue set over queue pairs "
        + first + ".." + (first + nqueues - 1) + " of a NIC link");
    return out[0];
  }

  static boolean nicGpuDoorbell(long link) {
    return nicLinkDoorbell(link) == 2;
  }

  static String nativeStatusName(int code) {
    return statusName(code);
  }

  /** "type field offset size" lines of the ABI structs (field "-" for a struct's size). */
  static String layout() {
    return abiLayout();
  }

  /** Runs the native descriptor checks; returns the descriptor as the library parsed it. */
  static byte[] parseDescriptor(byte[] bytes) {
    byte[] out = new byte[REGION_DESC_BYTES];
    check(regionDescParse(bytes, bytes.length, out), "region descriptor");
    return out;
  }

  // ---- contexts ----

  static long createContext(int device) {
    long[] out = new long[1];
    check(ctxCreate(device, out), "context on device " + device);
    return out[0];
  }

  static void destroyContext(long ctx) {
    ctxDestroy(ctx);
  }

  // ---- regions ----

  static long createRegion(long ctx, MemoryKind kind, long length, int id) {
    long[] out = new long[1];
    check(regionCreate(ctx, kind.wireId(), length, id, out), "region " + Integer.toUnsignedString(id));
    return out[0];
  }

  static void destroyRegion(long region) {
    regionDestroy(region);
  }

  /** [device pointer, host pointer or 0, length, id, key]. */
  static long[] regionInfo(long region) {
    long[] info = new long[5];
    regionInfo(region, info);
    return info;
  }

  static byte[] exportRegion(long region) {
    byte[] out = new byte[REGION_DESC_BYTES];
    check(regionExport(region, out), "export of region");
    return out;
  }

  static long importRemote(long ctx, byte[] descriptor) {
    long[] out = new long[1];
    check(remoteImport(ctx, descriptor, out), "import of a peer region");
    return out[0];
  }

  static long aliasRemote(long local) {
    long[] out = new long[1];
    check(remoteAlias(local, out), "alias of a local region");
    return out[0];
  }

  static void destroyRemote(long remote) {
    remoteDestroy(remote);
  }

  /** [device pointer, host pointer or 0, length, id]. */
  static long[] remoteInfo(long remote) {
    long[] info = new long[4];
    remoteInfo(remote, info);
    return info;
  }

  static void checkRemote(long remote, int id, long key, long offset, long length) {
    check(remoteCheck(remote, id, key, offset, length), "write request");
  }

  // ---- queue sets ----

  static long createQueueSet(long ctx, Backend backend, int nqueues, int depth, long[] locals, long[] remotes) {
    long[] out = new long[1];
    check(queueSetCreate(ctx, backend.code(), nqueues, depth, locals, remotes, out),
        backend.name().toLowerCase(java.util.Locale.ROOT) + " queue set of " + nqueues + " queues");
    return out[0];
  }

  static void destroyQueueSet(long qs) {
    queueSetDestroy(qs);
  }

  static long queueSetDevicePointer(long qs) {
    return queueSetDevice(qs);
  }

  static void checkQueueSet(long qs, boolean clear) {
    check(queueSetCheck(qs, clear), "queue set");
  }

  static void setQueueSetLocals(long qs, int first, long[] regions) {
    check(queueSetSetLocals(qs, first, regions), "queue set local entries");
  }

  /**
   * Updates local entries [first, first + regions.length) of the set's host table and returns the
   * device address of entry {@code first}; {@code image} receives their device image
   * ({@code slip_dev_region}, 32 bytes each) for the caller to copy there, stream-ordered.
   */
  static long stageQueueSetLocals(long qs, int first, long[] regions, byte[] image) {
    long[] dst = new long[1];
    check(queueSetStageLocals(qs, first, regions, image, dst), "queue set local entries");
    return dst[0];
  }

  // ---- partition ----

  /** [output bound, scratch bytes] of {@code slip_partition} for {@code rows} rows of these payload widths. */
  static long[] partitionSizes(int[] widths, long rows, int nparts) {
    long[] out = new long[2];
    check(partitionBounds(widths, rows, nparts, out), "partition sizes");
    return out;
  }

  /** Runs {@code slip_partition} on {@code device} and waits for it (polling) up to {@code timeoutMs}. */
  static void partition(int device, long keys, long rows, int[] widths, long[] cols, int nparts, long out,
      long outCap, long offsets, long counts, long scratch, long scratchBytes, long timeoutMs) {
    check(partitionRun(device, keys, rows, widths, cols, nparts, out, outCap, offsets, counts, scratch, scratchBytes,
        timeoutMs), "partition of " + rows + " rows into " + nparts + " partitions");
  }

  // ---- resident server (ResidentServer) ----

  static long createServer(long ctx, int readers, int dirSlots, int ctas, int threads, long idleNanos) {
    long[] out = new long[1];
    check(serverCreate(ctx, readers, dirSlots, ctas, threads, idleNanos, out), "resident server of " + ctas + " x "
        + threads + " threads");
    return out[0];
  }

  static void setServerReader(long server, int index, long ring, long landing, long landingLen, long landingKey) {
    check(serverSetReader(server, index, ring, landing, landingLen, landingKey), "reader entry " + index);
  }

  static void setServerReaderNic(long server, int index, long ring, long queue, int landingIndex, int stagingIndex,
      long landingLen, long landingKey) {
    check(serverSetReaderNic(server, index, ring, queue, landingIndex, stagingIndex, landingLen, landingKey),
        "gpunetio reader entry " + index);
  }

  static void clearServerReader(long server, int index) {
    check(serverClearReader(server, index), "reader entry " + index);
  }

  static void putServerOutput(long server, int shuffle, long map, long base, long offsets, long counts, int nparts,
      int nicId, int nicKey, long nicOffset, int linkKey) {
    check(serverPutOutput(server, shuffle, map, base, offsets, counts, nparts, nicId, nicKey, nicOffset, linkKey),
        "directory entry of shuffle " + shuffle + " map " + map);
  }

  /** The native status: 0, or SLIP_ERR_TIMEOUT while a push still reads the output (its memory must stay). */
  static int revokeServerOutput(long server, int shuffle, long map, long timeoutNanos, String[] error) {
    int st = serverRevokeOutput(server, shuffle, map, timeoutNanos);
    if (st != 0) {
      error[0] = lastError();
    }
    return st;
  }

  /** Launches the kernel unless resident (with {@code onlyIfWork}, only when a ring holds a request); whether it did. */
  static boolean startServer(long server, boolean onlyIfWork) {
    int[] launched = new int[1];
    check(serverStart(server, onlyIfWork, launched), onlyIfWork ? "resident server wake" : "resident server start");
    return launched[0] != 0;
  }

  static boolean serverIsResident(long server) {
    return serverResident(server);
  }

  static void stopServer(long server) {
    check(serverStop(server), "resident server stop");
  }

  /** [served, failed, bytes, CTAs resident]. */
  static long[] serverStats(long server) {
    long[] out = new long[4];
    check(serverStats(server, out), "resident server statistics");
    return out;
  }

  static void destroyServer(long server) {
    serverDestroy(server);
  }

  static long attachRing(long ctx, String path) {
    long[] out = new long[1];
    check(ringAttach(ctx, path, out), "request ring " + path);
    return out[0];
  }

  static void detachRing(long ring) {
    ringDetach(ring);
  }

  static void ackRing(long ring) {
    ringAck(ring);
  }

  static long ringHostPointer(long ring) {
    return ringHost(ring);
  }

  static void setServerReaderRemote(long server, int index, long ring, long queue, int landingIndex,
      int stagingIndex, long landingLen, long landingKey, int ringId, int ringKey, int mirrorId, int mirrorKey) {
    check(serverSetReaderRemote(server, index, ring, queue, landingIndex, stagingIndex, landingLen, landingKey, ringId,
        ringKey, mirrorId, mirrorKey), "remote reader entry " + index);
  }

  static int nicRegisterFile(long nic, long ptr, long length, int id, String path) {
    int[] k = new int[1];
    check(nicRegFile(nic, ptr, length, id, path, k), "NIC registration of region " + Integer.toUnsignedString(id)
        + " (" + path + ")");
    return k[0];
  }

  /** Posts {@code n} operations of 9 longs each (slip_nic_op's fields); returns the status (0, or a failure with {@link #lastError}). */
  static int nicPost(long link, int q, long[] ops, int n, long timeoutNs) {
    return nicHostPost(link, q, ops, n, timeoutNs);
  }

  static int nicDrain(long link, int q, long timeoutNs) {
    return nicHostDrain(link, q, timeoutNs);
  }

  static String errorText() {
    return lastError();
  }
}
