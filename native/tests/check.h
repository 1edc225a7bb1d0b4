// The native tests' one assertion: EXPECT(cond, fmt, ...) records a failure with the file, line,
// condition and a printf-style message, and the test goes on; check_report() prints the verdict
// and gives main() its exit status.
#pragma once

#include <stdio.h>

static int g_failures = 0;

#define EXPECT(cond, ...)                                              \
  do {                                                                 \
    if (!(cond)) {                                                     \
      g_failures++;                                                    \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
      fprintf(stderr, __VA_ARGS__);                                    \
      fprintf(stderr, "\n");                                           \
    }                                                                  \
  } while (0)

static inline int check_report(const char* test) {
  if (g_failures) {
    fprintf(stderr, "%s: %d failures\n", test, g_failures);
    return 1;
  }
  printf("%s: all passed\n", test);
  return 0;
}
