// Region checks shared by every executor: the one place that decides whether a write may land.
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "slipstream/host.h"

extern "C" const slip_region_entry *slip_region_find(const slip_region_entry *table, uint32_t n,
                                                     uint32_t id) {
  for (uint32_t i = 0; i < n; i++)
    if (table[i].id == id) return &table[i];
  return nullptr;
}

static slip_status report(slip_dev_error *err, slip_status code, uint32_t id, uint64_t off,
                          uint64_t len, uint64_t limit, uint64_t got_key) {
  if (err) {
    err->region_id = id;
    err->offset = off;
    err->length = len;
    err->limit = limit;
    err->got_key = got_key;
    err->code = (uint32_t)code;
  }
  return code;
}

extern "C" slip_status slip_region_validate(const slip_region_entry *table, uint32_t n, uint32_t id,
                                            int key_check, uint64_t key, uint64_t offset,
                                            uint64_t length, int need_flag, slip_dev_error *err) {
  const slip_region_entry *e = slip_region_find(table, n, id);
  if (!e) return report(err, SLIP_ERR_BAD_REGION, id, offset, length, n, 0);
  if (key_check && e->key != key) return report(err, SLIP_ERR_BAD_KEY, id, offset, length, 0, key);
  if (need_flag && (e->flags & (uint32_t)need_flag) != (uint32_t)need_flag)
    return report(err, SLIP_ERR_BAD_REGION, id, offset, length, e->flags, 0);
  // offset + length may overflow: compare without adding.
  if (offset > e->length || length > e->length - offset)
    return report(err, SLIP_ERR_OUT_OF_RANGE, id, offset, length, e->length, 0);
  return SLIP_OK;
}

extern "C" void slip_dev_error_publish(slip_dev_error *rec, const slip_dev_error *e, uint32_t queue) {
  uint32_t expected = 0;
  if (!__atomic_compare_exchange_n(&rec->claimed, &expected, 1u, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return;  // an earlier error is already recorded
  rec->region_id = e->region_id;
  rec->offset = e->offset;
  rec->length = e->length;
  rec->limit = e->limit;
  rec->got_key = e->got_key;
  rec->queue = queue;
  __atomic_store_n(&rec->code, e->code, __ATOMIC_RELEASE);
}

extern "C" void slip_dev_error_format(const slip_dev_error *e, char *buf, size_t n) {
  switch (e->code) {
    case SLIP_OK:
      snprintf(buf, n, "no error");
      break;
    case SLIP_ERR_OUT_OF_RANGE:
      snprintf(buf, n, "queue %u: offset %" PRIu64 " + length %" PRIu64 " outside region %u (length %" PRIu64 ")",
               e->queue, e->offset, e->length, e->region_id, e->limit);
      break;
    case SLIP_ERR_BAD_KEY:
      // The expected key is a secret of the region's owner: name what was presented only.
      snprintf(buf, n, "queue %u: key 0x%016" PRIx64 " presented for region %u does not match its registered key",
               e->queue, e->got_key, e->region_id);
      break;
    case SLIP_ERR_BAD_REGION:
      snprintf(buf, n, "queue %u: region %u is not registered for this access (offset %" PRIu64 ", length %" PRIu64 ")",
               e->queue, e->region_id, e->offset, e->length);
      break;
    default:
      snprintf(buf, n, "queue %u: %s at region %u offset %" PRIu64 " length %" PRIu64, e->queue,
               slip_status_name((slip_status)e->code), e->region_id, e->offset, e->length);
  }
}

extern "C" slip_status slip_region_desc_parse(const void *buf, size_t len, slip_region_desc *out) {
  slip_region_desc d;
  if (!buf || !out) return slip_set_error(SLIP_ERR_INVALID_ARG, "slip_region_desc_parse: null argument");
  if (len != sizeof d)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "region descriptor of %zu bytes, expected %zu", len, sizeof d);
  memcpy(&d, buf, sizeof d);
  if (d.magic != SLIP_REGION_DESC_MAGIC)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "region descriptor magic 0x%08x, expected 0x%08x", d.magic,
                          SLIP_REGION_DESC_MAGIC);
  if (d.version != SLIP_REGION_DESC_VERSION)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "region descriptor version %u, expected %u", d.version,
                          SLIP_REGION_DESC_VERSION);
  if (d.kind != SLIP_MEM_DEVICE && d.kind != SLIP_MEM_HOST_SHM)
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "region %u: memory kind %u, expected %d (device) or %d (host shared memory)",
                          d.id, d.kind, SLIP_MEM_DEVICE, SLIP_MEM_HOST_SHM);
  if (d.length == 0) return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR, "region %u: length 0", d.id);
  if (d.kind == SLIP_MEM_HOST_SHM &&
      (memchr(d.shm_name, 0, sizeof d.shm_name) == nullptr || strncmp(d.shm_name, "/slip-", 6) != 0 ||
       strchr(d.shm_name + 1, '/') != nullptr))
    return slip_set_error(SLIP_ERR_BAD_DESCRIPTOR,
                          "region %u: shared-memory name is not a NUL-terminated \"/slip-...\" name", d.id);
  *out = d;
  return SLIP_OK;
}

static uint64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

extern "C" slip_status slip_signal_wait_ge(const uint64_t *sig, uint64_t value, uint64_t timeout_ns) {
  const uint64_t t0 = now_ns();
  uint64_t v;
  while ((v = __atomic_load_n(sig, __ATOMIC_ACQUIRE)) < value) {
    if (now_ns() - t0 > timeout_ns)
      return slip_set_error(SLIP_ERR_TIMEOUT, "signal 0x%016llx after %llu ms, expected >= 0x%016llx",
                            (unsigned long long)v, (unsigned long long)(timeout_ns / 1000000),
                            (unsigned long long)value);
  }
  return SLIP_OK;
}

#define SLIP_F(T, f) {#T, #f, (uint32_t)offsetof(T, f), (uint32_t)sizeof(((T *)nullptr)->f)}
#define SLIP_S(T) {#T, "", 0u, (uint32_t)sizeof(T)}
static const slip_layout_field kLayout[] = {
    SLIP_S(slip_region_desc),
    SLIP_F(slip_region_desc, magic), SLIP_F(slip_region_desc, version), SLIP_F(slip_region_desc, kind),
    SLIP_F(slip_region_desc, id), SLIP_F(slip_region_desc, device), SLIP_F(slip_region_desc, key),
    SLIP_F(slip_region_desc, length), SLIP_F(slip_region_desc, owner_pid), SLIP_F(slip_region_desc, ipc_handle),
    SLIP_F(slip_region_desc, shm_name), SLIP_F(slip_region_desc, reserved),
    SLIP_S(slip_proxy_desc),
    SLIP_F(slip_proxy_desc, op), SLIP_F(slip_proxy_desc, lap), SLIP_F(slip_proxy_desc, dst_region),
    SLIP_F(slip_proxy_desc, src_region), SLIP_F(slip_proxy_desc, sig_region), SLIP_F(slip_proxy_desc, dst_key),
    SLIP_F(slip_proxy_desc, sig_key), SLIP_F(slip_proxy_desc, dst_offset), SLIP_F(slip_proxy_desc, src_offset),
    SLIP_F(slip_proxy_desc, length), SLIP_F(slip_proxy_desc, sig_offset), SLIP_F(slip_proxy_desc, sig_add),
    SLIP_F(slip_proxy_desc, reserved),
    SLIP_S(slip_proxy_ctrl),
    SLIP_F(slip_proxy_ctrl, head), SLIP_F(slip_proxy_ctrl, tail),
    SLIP_S(slip_dev_error),
    SLIP_F(slip_dev_error, code), SLIP_F(slip_dev_error, region_id), SLIP_F(slip_dev_error, offset),
    SLIP_F(slip_dev_error, length), SLIP_F(slip_dev_error, limit), SLIP_F(slip_dev_error, got_key),
    SLIP_F(slip_dev_error, queue), SLIP_F(slip_dev_error, claimed),
    SLIP_S(slip_dev_region),
    SLIP_F(slip_dev_region, base), SLIP_F(slip_dev_region, length), SLIP_F(slip_dev_region, key),
    SLIP_F(slip_dev_region, id), SLIP_F(slip_dev_region, flags),
};
#undef SLIP_F
#undef SLIP_S

extern "C" const slip_layout_field *slip_abi_layout(uint32_t *count) {
  if (count) *count = (uint32_t)(sizeof kLayout / sizeof kLayout[0]);
  return kLayout;
}
