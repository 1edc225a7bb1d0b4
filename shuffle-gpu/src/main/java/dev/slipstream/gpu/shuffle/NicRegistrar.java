package dev.slipstream.gpu.shuffle;

/**
 * Registers device memory with an executor GPU's RDMA NIC, so that its queue pairs may read or
 * write it ({@link dev.slipstream.gpu.NativeNic}): once per region, never per block or request.
 */
public interface NicRegistrar {
  /** Registers {@code length} bytes at {@code pointer} as region {@code id}; returns its memory key. */
  int register(long pointer, long length, int id);

  /** Removes registration ({@code id}, {@code mkey}); only once no queue pair uses it. */
  void deregister(int id, int mkey);
}
