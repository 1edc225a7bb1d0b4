package dev.slipstream.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/**
 * The check of an imported region's claimed length against the allocation really mapped
 * (cuMemGetAddressRange's answer), without a GPU: a descriptor that claims more than the exporter
 * allocated is refused naming both sizes.
 */
class RemoteRegionExtentTest {
  @Test
  void aClaimInsideTheAllocationIsAccepted() {
    RemoteRegion.checkExtent(7, 0x10000, 4096, 0x10000, 4096);
    RemoteRegion.checkExtent(7, 0x10000, 2048, 0x10000, 4096);
    RemoteRegion.checkExtent(7, 0x10800, 2048, 0x10000, 4096);
  }

  @Test
  void aClaimBeyondTheAllocationIsRefusedNamingBoth() {
    GpuException e = assertThrows(GpuException.class, () -> RemoteRegion.checkExtent(7, 0x10000, 8192, 0x10000, 4096));
    assertEquals(SlipStatus.SLIP_ERR_BAD_DESCRIPTOR, e.status());
    assertEquals("imported region 7 claims 8192 bytes at 0x10000, but the allocation mapped there has 4096 bytes from"
        + " 0x10000 (4096 from the region's start): expected the claimed length inside the allocation", e.getMessage());
    assertThrows(GpuException.class, () -> RemoteRegion.checkExtent(7, 0x10800, 4096, 0x10000, 4096));
    assertThrows(GpuException.class, () -> RemoteRegion.checkExtent(7, 0x0f000, 16, 0x10000, 4096), "before the base");
    assertThrows(GpuException.class, () -> RemoteRegion.checkExtent(7, 0x20000, 16, 0x10000, 4096), "past the end");
  }
}
