// Wire format of the gpunetio queue-pair connection data (slipstream/gpunetio_nic.h): checked
// before a NIC is told to connect to it.
#include <string.h>

#include "nic_qp.h"
#include "slipstream/abi.h"
#include "slipstream/gpunetio_nic.h"

static_assert(sizeof(slip_nic_qp_info) == 64, "slip_nic_qp_info is a wire format: 64 bytes");

extern "C" slip_status slip_nic_qp_info_parse(const void *buf, size_t len, slip_nic_qp_info *out) {
  slip_nic_qp_info v;
  if (!buf || !out) return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_nic_qp_info_parse: null argument");
  if (len != sizeof v)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "queue-pair info of %zu bytes, expected %zu", len, sizeof v);
  memcpy(&v, buf, sizeof v);
  if (v.magic != SLIP_NIC_QP_INFO_MAGIC)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "queue-pair info magic 0x%08x, expected 0x%08x", v.magic,
                          SLIP_NIC_QP_INFO_MAGIC);
  if (v.version != SLIP_NIC_QP_INFO_VERSION)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "queue-pair info version %u, expected %u", v.version,
                          SLIP_NIC_QP_INFO_VERSION);
  if (v.addr_type != SLIP_NIC_ADDR_IB && v.addr_type != SLIP_NIC_ADDR_ROCE)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "queue-pair info address type %u, expected %d (IB) or %d (RoCE)",
                          v.addr_type, SLIP_NIC_ADDR_IB, SLIP_NIC_ADDR_ROCE);
  if (v.qpn == 0 || v.qpn > 0xffffffu)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "queue-pair number %u, expected 1..0xffffff", v.qpn);
  if (v.mtu < 1 || v.mtu > 5)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "path MTU code %u, expected 1..5 (256 to 4096 bytes)", v.mtu);
  if (v.addr_type == SLIP_NIC_ADDR_IB && (v.lid == 0 || v.lid > 0xffffu))
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "IB LID %u, expected 1..0xffff", v.lid);
  if (v.lid > 0xffffu) return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "LID %u, expected 0..0xffff", v.lid);
  if (v.psn > 0xffffffu)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "packet sequence number 0x%x, expected 24 bits", v.psn);
  for (size_t i = 0; i < sizeof v.reserved; i++)
    if (v.reserved[i] != 0)
      return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "queue-pair info reserved byte %zu is 0x%02x, expected 0", i,
                            v.reserved[i]);
  *out = v;
  return SLIP_OK;
}

slip_status slip_nic_check_open(const char *ibdev, int port, int gid_index, int doorbell, const void *out) {
  if (!ibdev || !out) return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_nic_open: null device name or result");
  if (doorbell != SLIP_NIC_DOORBELL_AUTO && doorbell != SLIP_NIC_DOORBELL_HOST && doorbell != SLIP_NIC_DOORBELL_GPU)
    return slip_set_error(SLIP_ERR_INVALID_ARG, "doorbell mode %d, expected %d (auto), %d (host) or %d (gpu)", doorbell,
                          SLIP_NIC_DOORBELL_AUTO, SLIP_NIC_DOORBELL_HOST, SLIP_NIC_DOORBELL_GPU);
  if (port < 1 || port > 255 || gid_index < 0 || gid_index > 255)
    return slip_set_error(SLIP_ERR_INVALID_ARG, "port %d, GID index %d: expected 1..255 and 0..255", port, gid_index);
  return SLIP_OK;
}

slip_status slip_nic_check_reg(const void *nic, const void *ptr, uint64_t len, uint32_t id, const void *mkey) {
  if (!nic || !ptr || !mkey || len == 0)
    return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_nic_reg: null argument or length 0");
  if (id >= SLIP_NIC_SINK_ID || len > (1ull << SLIP_IOVA_SHIFT))
    return slip_set_error(SLIP_ERR_INVALID_ARG, "region %u of %llu bytes, expected id < %u and length <= 2^%d", id,
                          (unsigned long long)len, SLIP_NIC_SINK_ID, SLIP_IOVA_SHIFT);
  return SLIP_OK;
}

slip_status slip_nic_check_link(const void *nic, uint32_t nq, uint32_t depth, const void *out) {
  if (!nic || !out || nq == 0)
    return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_nic_link_create: null NIC or result, or no queue pairs");
  if (depth < 2 || depth > 32768 || (depth & (depth - 1)) != 0)
    return slip_set_error(SLIP_ERR_INVALID_ARG, "queue depth %u, expected a power of two in 2..32768", depth);
  return SLIP_OK;
}

slip_status slip_nic_check_keys(uint32_t id, uint32_t lkey, uint32_t rkey) {
  if (lkey != rkey)
    return slip_set_error(SLIP_ERR_UNSUPPORTED, "region %u: lkey 0x%x differs from rkey 0x%x (one key per region expected)",
                          id, lkey, rkey);
  return SLIP_OK;
}
