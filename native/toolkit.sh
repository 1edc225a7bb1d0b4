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

# rdma-core's headers (infiniband/mlx5dv.h) let CMake build the real-NIC path of the gpunetio
# backend (src/nic_mlx5.cu; the libraries are loaded at run time). When they are missing and this
# runs as root on a Debian/Ubuntu machine, libibverbs-dev is installed (SLIP_NO_INSTALL=1: never);
# otherwise the build goes on without that path and says so in one line.
slip_ensure_rdma_headers() {
  [[ -f /usr/include/infiniband/mlx5dv.h ]] && return 0
  if [[ "${SLIP_NO_INSTALL:-0}" != 1 && "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "native: installing libibverbs-dev (rdma-core headers for the gpunetio NIC path)"
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -q libibverbs-dev >/dev/null 2>&1 ||
       { apt-get update -q >/dev/null 2>&1 &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -q libibverbs-dev >/dev/null 2>&1; }; then
      return 0
    fi
  fi
  echo "native: rdma-core headers (libibverbs-dev) not found: the gpunetio NIC path is not built (the software NIC still is)"
}
