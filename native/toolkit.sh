# Sourced by native/build.sh and native/build-jni.sh: finds CMake and nvcc (on PATH, or under
# $CUDA_HOME/bin, default /usr/local/cuda) and puts the CUDA bin folder on PATH. Without them it
# sets slip_missing to the first tool not found and slip_missing_why to a sentence saying so.
slip_cuda_bin="${CUDA_HOME:-/usr/local/cuda}/bin"
slip_missing=""
slip_missing_why=""
for slip_tool in cmake nvcc; do
  if ! command -v "$slip_tool" >/dev/null 2>&1 && [[ ! -x "$slip_cuda_bin/$slip_tool" ]]; then
    slip_missing="$slip_tool"
    slip_missing_why="'$slip_tool' was not found (on PATH or in $slip_cuda_bin); the native library and the CUDA kernels need CMake >= 3.24 and the CUDA toolkit"
    break
  fi
done
if [[ -d "$slip_cuda_bin" ]]; then
  export PATH="$PATH:$slip_cuda_bin"
fi
