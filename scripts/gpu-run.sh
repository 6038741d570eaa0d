#!/usr/bin/env bash
# docs/design.md §8, step 2 (on the GPU machine, from the repo root with .gpu/ carried):
# everything the GPU figures of docs/design.md §4.3 need, in one go, in under ~8 minutes on one H100:
#   1. the GPU tests: gpu_engine_tests (pinned staging, one sync per run, no device
#      allocation after warm-up, CUDA graph replay = plain run, TF32 against FP32, memory
#      given back to the driver), gpu_memory_tests, and the CUDA cases of kernels_tests
#      and engine_tests;
#   2. the pool and scope benchmarks on cuda:0, and the engine benchmark on cuda:0 with
#      CUDA graphs on and off (the same run, the plain run as the baseline);
#   3. the load test of the daemon on cuda:0 next to the bare echo server (mlp batch 1 and
#      recsys batch 16 at concurrency 1, 8 and 64).
# nvidia-smi's memory.used is recorded before and after each part (memory.txt).
# Output goes to $OUT when set (the device tool brings it back), else to .gpu/out:
#   machine.txt  tests.txt (full logs; one summary line per binary at the top of each
#   section)  gpu_figures.txt (the lines the GPU tests print for the README)
#   benchmarks_cuda.txt  loadtest.md  loadtest.log  ndserved.log  memory.txt  times.txt
#   device_allocs.txt (ndserve_memory_device_alloc_total after each load-test case)
# Knobs: ONLY_LOADTEST=1 reruns only the load test; SKIP_LOADTEST=1 skips it;
# DURATION_S (10) per load-test case; BENCH_INSTANCES (4); LOADTEST_INSTANCES (unset);
# BUDGET_S (540): one device call may run 600 s, so every step's time limit is cut to
# what is left of the budget, and a step with under 15 s left is skipped (times.txt
# says which), leaving time for $OUT to come back.
# The recsys example model is not in git; it is generated here with the machine's
# python3 (onnx + numpy).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.gpu/out}
mkdir -p "$OUT"
G=/tmp/ndserve-gpu
rm -rf "$G" && mkdir -p "$G" && tar -C "$G" -xJf .gpu/bundle.tar.xz
cuda_libs=$(dirname "$(find / -name 'libcublas.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$G/lib:$cuda_libs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export NDSERVE_SOURCE_DIR="$PWD"
{ nvidia-smi; echo "cuBLAS from: $cuda_libs"; nproc; } 2>&1 | tee "$OUT/machine.txt"
[[ -f examples/models/recsys/1/model.onnx ]] ||
  python3 tools/gen_models.py --only examples --out . 2>&1 | tail -2
t0=$SECONDS
BUDGET_S=${BUDGET_S:-540}
cap() {  # cap <limit s>: the limit, or what is left of the budget when that is less
  local left=$((BUDGET_S - SECONDS))
  if ((left < $1)); then echo "$left"; else echo "$1"; fi
}
has_time() {  # has_time <step>: false, and noted, when under 15 s of the budget is left
  ((BUDGET_S - SECONDS >= 15)) && return 0
  echo "$1: skipped, $((BUDGET_S - SECONDS)) s of the budget left" | tee -a "$OUT/times.txt"
  return 1
}
mark() {  # mark <what>: the driver's view of used memory and the elapsed time
  echo "$1: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>&1 | head -1)" \
    >>"$OUT/memory.txt"
  echo "$1: $((SECONDS - t0)) s" >>"$OUT/times.txt"
}
rc=0
mark start
if [[ ${ONLY_LOADTEST:-0} != 1 ]]; then
# The GPU binaries whole; of the mixed ones only the CUDA cases (their CPU cases ran in
# CI). Each under a time limit so one hang cannot eat the session.
run_tests() {  # run_tests <binary> <limit s> [gtest args...]
  local t=$1 limit=$2
  shift 2
  has_time "$t" || { rc=1; return; }
  timeout "$(cap "$limit")" "$G/bin/$t" --gtest_brief=1 "$@" >"/tmp/$t.txt" 2>&1 || rc=1
  { echo "== $t: $(grep -E '^\[  (PASSED|FAILED) ' "/tmp/$t.txt" | tr '\n' ' ')"
    cat "/tmp/$t.txt"; } >>"$OUT/tests.txt"
  grep -E '^\[  (PASSED|FAILED|SKIPPED)' "/tmp/$t.txt" | head -20
  grep -hE 'max abs diff|driver-visible' "/tmp/$t.txt" >>"$OUT/gpu_figures.txt"
}
run_tests gpu_engine_tests 240
mark "after gpu_engine_tests"
run_tests gpu_memory_tests 60
run_tests kernels_tests 120 --gtest_filter='*cuda*:*Cuda*:*CUDA*:*Gpu*:*GPU*'
run_tests engine_tests 120 --gtest_filter='*cuda*:*Cuda*:*CUDA*:*Gpu*:*GPU*'
mark "after tests"
# Pools over the CUDA allocator against raw cudaMalloc/cudaFree, the scope benchmark,
# and the engine on cuda:0: one predictor with graphs on, then off (same run: the
# replay's baseline), then BENCH_INSTANCES predictors with graphs on.
{
  has_time pool_benchmark &&
    NDSERVE_BENCH_DEVICE=cuda:0 timeout "$(cap 60)" "$G/bin/pool_benchmark" \
      --benchmark_min_time=0.1 --benchmark_filter="${POOL_FILTER:-.}"
  has_time manager_benchmark &&
    NDSERVE_BENCH_DEVICE=cuda:0 timeout "$(cap 60)" "$G/bin/manager_benchmark" \
      --benchmark_min_time=0.1
  for run in "1 1" "1 0" "${BENCH_INSTANCES:-4} 1"; do
    read -r n graphs <<<"$run"
    has_time "engine_benchmark $n $graphs" || continue
    echo "== engine on cuda:0, $n predictor(s) per model, CUDA graphs $([[ $graphs == 1 ]] && echo on || echo off)"
    NDSERVE_BENCH_DEVICE=cuda:0 NDSERVE_BENCH_INSTANCES=$n NDSERVE_BENCH_CUDA_GRAPHS=$graphs \
      timeout "$(cap 90)" "$G/bin/engine_benchmark" --benchmark_min_time=0.2 --benchmark_filter='engine/'
  done
} 2>&1 | grep -v '^I' | tee "$OUT/benchmarks_cuda.txt"
mark "after benchmarks"
fi
# Load test: scripts/loadtest-bench.sh with the bundle's binaries, the daemon on cuda:0,
# against the bare echo server on the same machine in the same run.
if [[ ${SKIP_LOADTEST:-0} != 1 ]] && has_time "load test"; then
BIN_DIR=$G/bin MODEL_REPOSITORY=examples/models DEVICE=cuda:0 RESULTS_DIR=/tmp/ndserve-lt \
  REPORT_ONLY=1 DURATION_S=${DURATION_S:-10} timeout "$(cap 300)" bash scripts/loadtest-bench.sh \
  "$OUT/loadtest.md" >"$OUT/loadtest.log" 2>&1 || rc=1
cp /tmp/ndserve-lt/ndserved.log /tmp/ndserve-lt/device_allocs.txt "$OUT/" 2>/dev/null
mark "after load test"
# The same load with LOADTEST_INSTANCES predictors per model (the example configs
# have one), when set: does a GPU serve more requests with more instances?
if [[ -n ${LOADTEST_INSTANCES:-} ]] && has_time "load test with instances"; then
  rm -rf /tmp/ndserve-models && cp -r examples/models /tmp/ndserve-models
  sed -i "s/count: 1/count: $LOADTEST_INSTANCES/" /tmp/ndserve-models/*/config.pbtxt
  BIN_DIR=$G/bin MODEL_REPOSITORY=/tmp/ndserve-models DEVICE=cuda:0 RESULTS_DIR=/tmp/ndserve-lt2 \
    REPORT_ONLY=1 DURATION_S=${DURATION_S:-10} timeout "$(cap 300)" bash scripts/loadtest-bench.sh \
    "$OUT/loadtest_instances.md" >>"$OUT/loadtest.log" 2>&1 || rc=1
  cp /tmp/ndserve-lt2/ndserved.log "$OUT/ndserved_instances.log" 2>/dev/null
  cat "$OUT/loadtest_instances.md"
fi
cat "$OUT/loadtest.md"
fi
mark end
cat "$OUT/memory.txt" "$OUT/times.txt" "$OUT/gpu_figures.txt" 2>/dev/null
exit $rc
