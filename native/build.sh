#!/usr/bin/env bash
# Configures, builds and tests the native library and CUDA kernels (one CMake tree).
# CPU-only tests run everywhere; GPU tests print "SKIP: <reason>" and are reported as skipped by
# ctest when no GPU is usable. Usage: native/build.sh [--no-test] [build-dir]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
run_tests=1
if [[ "${1:-}" == "--no-test" ]]; then run_tests=0; shift; fi
build="${1:-$here/target/build}"

for tool in cmake nvcc; do
  if ! command -v "$tool" >/dev/null 2>&1 && [[ ! -x /usr/local/cuda/bin/$tool ]]; then
    echo "native/build.sh: '$tool' not found; the native module needs CMake >= 3.24 and the CUDA toolkit (nvcc)" >&2
    exit 2
  fi
done
export PATH="$PATH:/usr/local/cuda/bin"

# One build at a time per tree (parallel Maven runs share it).
mkdir -p "$(dirname "$build")"
exec 9>"$build.lock"
flock 9

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
