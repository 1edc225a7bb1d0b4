#!/usr/bin/env bash
# Configures, builds and tests the native library and CUDA kernels (one CMake tree).
# CPU-only tests run everywhere; GPU tests print "SKIP: <reason>" and are reported as skipped by
# ctest when no GPU is usable. Without CMake or nvcc it builds nothing and says so in one line.
# Usage: native/build.sh [--no-test] [build-dir]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
run_tests=1
if [[ "${1:-}" == "--no-test" ]]; then run_tests=0; shift; fi
build="${1:-$here/target/build}"

# Without CMake or nvcc nothing native is built or tested: one line says so, and the build goes on
# (the plugin then runs on the host path only). SLIP_REQUIRE_NATIVE=1 makes that an error instead.
source "$here/toolkit.sh"
if [[ -n "$slip_missing" ]]; then
  if [[ "${SLIP_REQUIRE_NATIVE:-0}" == 1 ]]; then
    echo "native/build.sh: $slip_missing_why (SLIP_REQUIRE_NATIVE=1)" >&2
    exit 2
  fi
  echo "native/build.sh: SKIPPED: $slip_missing_why; without them the native library, the CUDA kernels and their tests are not built, and Slipstream runs on the host path only (no GPU shuffles)"
  exit 0
fi

# One build at a time per tree (parallel Maven runs share it).
mkdir -p "$(dirname "$build")"
exec 9>"$build.lock"
flock 9
slip_ensure_rdma_headers

gen=()
if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
jobs="$(nproc 2>/dev/null || echo 2)"

cmake -S "$here" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE="${SLIP_BUILD_TYPE:-Release}" ${SLIP_CMAKE_ARGS:-}
# SLIP_BUILD_TARGETS: build only these targets (native/build-jni.sh builds the JNI library this way).
cmake --build "$build" --parallel "$jobs" ${SLIP_BUILD_TARGETS:+--target $SLIP_BUILD_TARGETS}
if [[ $run_tests == 1 ]]; then
  ctest --test-dir "$build" --output-on-failure ${SLIP_CTEST_ARGS:-}
  # ctest shows no output for skipped tests: print why they skipped.
  grep -h '^SKIP:' "$build/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u || true
fi
