#!/usr/bin/env bash
# Builds the JNI library and the kernel fatbin (src/jni) and copies them into a resource folder
# for the shuffle-core jar: OUT/dev/slipstream/native/linux-x86_64/{libslipstream_jni.so,
# slipstream-kernels.fatbin, slipstream-kernels.properties, build.properties (built=true, or
# built=false and the reason)}. Called by shuffle-core's Maven build
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
# reports "built without the GPU binding: <why>" and the plugin stays on the host path. (CI has
# the toolkit, and the native module's own build fails without it.)
for tool in cmake nvcc; do
  if ! command -v "$tool" >/dev/null 2>&1 && [[ ! -x /usr/local/cuda/bin/$tool ]]; then
    why="'$tool' was not found at build time (the GPU binding needs CMake >= 3.24 and the CUDA toolkit)"
    printf 'built=false\nreason=%s\n' "$why" >"$dest/build.properties"
    echo "native/build-jni.sh: WARNING: building without the GPU binding: $why" >&2
    exit 0
  fi
done

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
