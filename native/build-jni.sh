#!/usr/bin/env bash
# Builds the JNI library and the kernel fatbin (src/jni) and copies them into a resource folder
# for the shuffle-gpu jar: OUT/dev/slipstream/native/linux-x86_64/{libslipstream_jni.so,
# slipstream-kernels.fatbin, slipstream-kernels.properties, build.properties (built=true, or
# built=false and the reason)}. Called by shuffle-gpu's Maven build
# (generate-resources). Builds in the CMake tree of native/build.sh (default: the one the native
# Maven module builds), under its lock, so a full build compiles the native objects once.
# Usage: native/build-jni.sh OUT [build-dir]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: native/build-jni.sh OUT [build-dir]}"
build="${2:-$here/target/native-build}"

dest="$out/dev/slipstream/native/linux-x86_64"
rm -rf "$dest" && mkdir -p "$dest"

# Without the CUDA toolkit the jar is built without the GPU binding, and says so: the loader then
# reports "built without the GPU binding: <why>" and the plugin stays on the host path.
source "$here/toolkit.sh"
if [[ -n "$slip_missing" ]]; then
  printf 'built=false\nreason=%s\n' "$slip_missing_why at build time" >"$dest/build.properties"
  echo "native/build-jni.sh: SKIPPED: the GPU binding (JNI library and kernels) is not built into the jar: $slip_missing_why; GPU shuffles are unavailable, the host path works"
  exit 0
fi

# jni.h: from SLIP_JAVA_HOME (Maven passes the JDK it runs on), else CMake looks for JAVA_HOME or javac.
if [[ -n "${SLIP_JAVA_HOME:-}" ]]; then
  export SLIP_CMAKE_ARGS="${SLIP_CMAKE_ARGS:-} -DSLIP_JAVA_HOME=$SLIP_JAVA_HOME"
fi
mkdir -p "$(dirname "$build")"
SLIP_BUILD_TARGETS="slipstream_jni slipstream_kernels_fatbin" "$here/build.sh" --no-test "$build" >"$build.jni.log" 2>&1 || {
  cat "$build.jni.log" >&2
  echo "native/build-jni.sh: building the JNI library failed (log above; without a JDK CMake skips the JNI targets: set JAVA_HOME)" >&2
  exit 1
}
cp "$build/src/jni/libslipstream_jni.so" "$build/src/jni/slipstream-kernels.fatbin" \
   "$build/src/jni/slipstream-kernels.properties" "$dest/"
echo "built=true" >"$dest/build.properties"
echo "native/build-jni.sh: libslipstream_jni.so ($(du -k "$dest/libslipstream_jni.so" | cut -f1) KiB), kernel fatbin and names in $dest"
