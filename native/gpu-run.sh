#!/usr/bin/env bash
# On the GPU machine: build, test (incl. compute-sanitizer memcheck and racecheck on small cases),
# run the baselines and the benchmark, and write everything under $OUT (or ./gpu-out).
#   native/gpu-run.sh [stages...]   stages: env build test sanitize baselines bench ncu gpunetio a2a
#                                   (default: all but a2a)
# a2a: slip_a2a with SLIP_A2A_RANKS processes (default "2 4 8"), and NCCL all-to-all at
# the same ranks where there are that many GPUs; more ranks than GPUs share GPUs (a check of the
# exchange, not a figure).
# The baselines are read from .baselines/ (a copy of shared/baselines: ../shared does not travel).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
out="${OUT:-$repo/gpu-out}"
mkdir -p "$out"
build="${SLIP_GPU_BUILD:-/tmp/slip-build}"
bin="$build"
stages=("$@")
[[ ${#stages[@]} -eq 0 ]] && stages=(env build test sanitize baselines bench ncu gpunetio)
# NVLink multicast stays off on these machines (a program using it can take the host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH="$PATH:/usr/local/cuda/bin"
status=0
want() { local s; for s in "${stages[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }
step() {  # step <log> <timeout-s> <command...>: runs, appends to the log, keeps going on failure
  local log="$1" limit="$2"; shift 2
  echo "=== $(date -u +%H:%M:%S) $*" | tee -a "$out/$log"
  timeout "$limit" "$@" 2>&1 | tee -a "$out/$log"
  local rc=${PIPESTATUS[0]}
  echo "=== rc=$rc" | tee -a "$out/$log"
  [[ $rc -ne 0 ]] && status=1
  return 0
}

if want env; then
  { date -u; nvidia-smi -L; nvidia-smi topo -m; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv;
    nvcc --version | tail -2; cmake --version | head -1; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())';
    uname -r; nproc; } >"$out/env.txt" 2>&1
  cat "$out/env.txt"
fi
if want build; then
  # -lineinfo: compute-sanitizer reports name source lines.
  SLIP_CMAKE_ARGS="-DCMAKE_CUDA_FLAGS=-lineinfo" step build_test.log 300 "$here/build.sh" --no-test "$build"
fi
if want test; then
  step build_test.log 260 ctest --test-dir "$build" -V
fi
if want sanitize; then
  cs="compute-sanitizer --target-processes all --error-exitcode 9"
  step sanitizer.log 120 $cs --tool memcheck "$bin/slip_partition_test" --small
  step sanitizer.log 160 $cs --tool memcheck "$bin/slip_pair_test" nvlink --small
  step sanitizer.log 160 $cs --tool memcheck "$bin/slip_pair_test" proxy --small
  step sanitizer.log 120 $cs --tool racecheck "$bin/slip_partition_test" --small
  step sanitizer.log 160 $cs --tool racecheck "$bin/slip_pair_test" nvlink --small
fi
if want baselines; then
  bl="$repo/.baselines"
  if [[ -d $bl ]]; then
    work=/tmp/slip-baselines; mkdir -p "$work"; cp "$bl"/* "$work"/
    (cd "$work" && nvcc -O3 -arch=sm_90 -o p2p p2p.cu && nvcc -O3 -arch=sm_90 -o ipc ipc_push.cu) 2>&1 | tee -a "$out/baselines.log"
    step baselines.log 120 "$work/p2p"
    for bs in 4096 65536 1048576; do
      n=$(( (512 << 20) / bs )); [[ $n -gt 65536 ]] && n=65536
      (cd "$work" && IPC_FILE="$work/ipc-$bs.bin" timeout 90 ./ipc recv 0 $bs $n 5 & sleep 0.5; cd "$work" && IPC_FILE="$work/ipc-$bs.bin" timeout 60 ./ipc send 1 $bs $n 5; wait) 2>&1 | tee -a "$out/baselines.log"
    done
    step baselines.log 240 torchrun --nproc_per_node=2 "$work/nccl_a2a.py"
  else
    echo "no .baselines/ folder: copy ../shared/baselines there and carry it" | tee -a "$out/baselines.log"
  fi
fi
if want bench; then
  step bench.log 100 "$bin/slip_bench" partition
  # Every tile and grid tuning of the partition kernel (the default picks one per partition count).
  step bench.log 120 "$bin/slip_bench" partition --variants
  step bench.log 240 "$bin/slip_bench" pair
  grep -h '^csv,' "$out/bench.log" >"$out/results.csv" || true
fi
if want ncu; then
  ncu_cmd=(ncu --clock-control none --target-processes all --section SpeedOfLight --section MemoryWorkloadAnalysis)
  for parts in 2 64 256; do
    step ncu.log 120 "${ncu_cmd[@]}" --section Occupancy --section WarpStateStats -k regex:'hist_kernel|scatter_kernel' -c 2 \
      "$bin/slip_bench" partition --quick --shape w12 --parts $parts
  done
  step ncu.log 120 "${ncu_cmd[@]}" -k regex:push_kernel -c 3 "$bin/slip_bench" pair --quick
fi
if want a2a; then
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  work=/tmp/slip-baselines; mkdir -p "$work"
  [[ -d "$repo/.baselines" ]] && cp "$repo/.baselines"/* "$work"/
  for n in ${SLIP_A2A_RANKS:-2 4 8}; do
    step a2a.log 240 "$bin/slip_a2a" --ranks "$n" ${SLIP_A2A_ARGS:-}
    if [[ $n -le $ngpu && -f "$work/nccl_a2a.py" ]]; then
      step a2a.log 240 torchrun --nproc_per_node="$n" "$work/nccl_a2a.py"
    else
      echo "NCCL all-to-all with $n ranks skipped: $ngpu GPUs here, or no .baselines/nccl_a2a.py" | tee -a "$out/a2a.log"
    fi
  done
  grep -h '^csv,' "$out/a2a.log" >"$out/a2a.csv" || true
fi
if want gpunetio; then
  # gpunetio backend: DOCA GPUNetIO device code against the software NIC. The build finds
  # the device headers in the nvidia-nccl Python package (see the build log's "GPUNetIO" line).
  grep -h 'GPUNetIO device headers' "$out/build_test.log" 2>/dev/null | tail -1 | tee -a "$out/gpunetio.log"
  step gpunetio.log 60 ctest --test-dir "$build" -R 'cpu_test|softnic_test' --output-on-failure
  step gpunetio.log 150 "$bin/slip_pair_test" gpunetio
  step gpunetio.log 180 compute-sanitizer --target-processes all --error-exitcode 9 --tool memcheck \
    "$bin/slip_pair_test" gpunetio --small
  step gpunetio.log 180 compute-sanitizer --target-processes all --error-exitcode 9 --tool racecheck \
    "$bin/slip_pair_test" gpunetio --small
  # One queue set serves the whole benchmark: four NIC threads for its 16 queue pairs.
  step gpunetio.log 150 env SLIP_SOFTNIC_THREADS="${SLIP_SOFTNIC_THREADS:-4}" "$bin/slip_bench" gpunetio ${SLIP_GPUNETIO_BENCH_ARGS:-}
  grep -h '^csv,' "$out/gpunetio.log" >"$out/gpunetio.csv" || true
fi
echo "gpu-run.sh: done, status $status; results in $out"
exit $status
