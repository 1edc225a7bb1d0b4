// Status names, the per-thread error text, and the out-of-band socket helpers.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "slipstream/host.h"

namespace {
thread_local char g_error[512] = "no error";

const char *const kNames[SLIP_STATUS_COUNT_] = {
    "SLIP_OK",           "SLIP_ERR_INVALID_ARG",    "SLIP_ERR_NO_DEVICE",   "SLIP_ERR_CUDA",
    "SLIP_ERR_OS",       "SLIP_ERR_NO_MEMORY",      "SLIP_ERR_BAD_REGION",  "SLIP_ERR_BAD_KEY",
    "SLIP_ERR_OUT_OF_RANGE", "SLIP_ERR_BAD_DESCRIPTOR", "SLIP_ERR_QUEUE_FULL", "SLIP_ERR_TIMEOUT",
    "SLIP_ERR_UNSUPPORTED", "SLIP_ERR_STATE",       "SLIP_ERR_PEER"};
}  // namespace

extern "C" const char *slip_status_name(slip_status s) {
  if ((int)s < 0 || (int)s >= SLIP_STATUS_COUNT_) return "SLIP_ERR_UNKNOWN";
  return kNames[s];
}

extern "C" const char *slip_last_error(void) { return g_error; }

extern "C" slip_status slip_set_error(slip_status s, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(g_error, sizeof g_error, "%s: %s", slip_status_name(s), msg);
  return s;
}

extern "C" slip_status slip_oob_send(int fd, const void *buf, size_t len) {
  slip_status st = SLIP_OK;
  const char *p = (const char *)buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    SLIP_SYS_CHECK(n > 0, "send");
    p += n;
    len -= (size_t)n;
  }
done:
  return st;
}

extern "C" slip_status slip_oob_recv(int fd, void *buf, size_t len) {
  slip_status st = SLIP_OK;
  char *p = (char *)buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) SLIP_FAIL(SLIP_ERR_PEER, "peer closed the connection with %zu bytes still expected", len);
    SLIP_SYS_CHECK(n > 0, "recv");
    p += n;
    len -= (size_t)n;
  }
done:
  return st;
}
