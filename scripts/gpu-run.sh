#!/usr/bin/env bash
# docs/design.md §8, step 2 (on the GPU machine, from the repo root with .gpu/ carried):
# everything the GPU figures of docs/design.md §4.3 need, in one go, in under ~8 minutes on one H100:
#   1. the GPU tests: gpu_engine_tests (pinned staging, one sync per run, no device
#      allocation after warm-up, CUDA graph replay = plain run, TF32 against FP32, memory
#      given back to the driver), gpu_memory_tests, the CUDA cases of kernels_tests
#      engine_tests and train_tests, and the cuda:0 cases of the PyTorch model tests (engine and
#      daemon) for the fixtures carried in .gpu/torch;
#   2. the pool and scope benchmarks on cuda:0, and the engine benchmark on cuda:0 with
#      CUDA graphs on and off (the same run, the plain run as the baseline), and training
#      session steps on cuda:0 beside the same session on the CPU;
#   3. the load test of the daemon on cuda:0 next to the bare echo server (mlp batch 1 and
#      recsys batch 16 at concurrency 1, 8 and 64).
# nvidia-smi's memory.used is recorded before and after each part (memory.txt).
# Output goes to $OUT/gpu-out.tar.gz ($OUT when set: the device tool brings it back;
# else .gpu/out), which holds:
#   machine.txt  tests_<binary>.txt (full logs, a summary line at the top)  gpu_figures.txt (the lines the GPU tests print for the README)
#   benchmarks_cuda.txt  loadtest.md  loadtest.log  ndserved.log  memory.txt  times.txt
#   device_allocs.txt (ndserve_memory_device_alloc_total after each load-test case)
#   server_times.txt (the daemon's mean request/queue/compute time per load-test case)
#   kernels_profile.txt (ncu's duration of each kernel of mlp and recsys b1 plain runs)
#   train_smoke.txt (a training session through the daemon on cuda:0: scripts/train-smoke.sh)
# Knobs: ONLY_LOADTEST=1 reruns only the load test; SKIP_LOADTEST=1 skips it;
# SKIP_POOLS=1 skips the pool and scope benchmarks; SKIP_ENGINE_BENCH=1 the engine benchmark
# (the training session benchmark still runs); SKIP_PROFILE=1 the ncu kernel profile;
# BUNDLE (.gpu/bundle.tar.xz) and TORCH_DIR (.gpu/torch) where the bundle and fixtures are;
# DURATION_S (10) per load-test case; BENCH_INSTANCES (4); LOADTEST_INSTANCES (unset);
# LOADTEST_SPIN_US (unset): a second load test with --infer_worker_spin_us at that value;
# SERVER_CPUS / CLIENT_CPUS: the load tests' servers and load generator pinned to these
# cores (scripts/loadtest-bench.sh); on a machine of 8 or more CPUs they default to the
# first three quarters and the last quarter, since a load generator sharing the servers'
# cores sets their tail (the echo server's p99 at concurrency 64 was 2.8-3.9 ms shared,
# 2.0 ms pinned, docs/benchmark-history.md); PIN=0 leaves them unpinned;
# BUDGET_S (540): one device call may run 600 s, so every step's time limit is cut to
# what is left of the budget, and a step with under 15 s left is skipped (times.txt
# says which), leaving time for $OUT to come back.
# The recsys example model is not in git; it is generated here with the machine's
# python3 (onnx + numpy).
set -uo pipefail
cd "$(dirname "$0")/.."
# A device call brings back at most 8 files, so everything is written to $W and packed
# into $OUT/gpu-out.tar.gz at every mark (a step killed at its limit still leaves the
# files written before it).
OUT=${OUT:-.gpu/out}
mkdir -p "$OUT"
W=/tmp/ndserve-gpu-out
rm -rf "$W" && mkdir -p "$W"
G=/tmp/ndserve-gpu
# BUNDLE and TORCH_DIR may point elsewhere than .gpu/: fixtures too big for one device
# call arrive over several calls into a folder on the warm machine (docs/design.md §8).
BUNDLE=${BUNDLE:-.gpu/bundle.tar.xz}
TORCH_DIR=${TORCH_DIR:-$PWD/.gpu/torch}
rm -rf "$G" && mkdir -p "$G" && tar -C "$G" -xJf "$BUNDLE"
cuda_libs=$(dirname "$(find / -name 'libcublas.so.13*' -not -path '/proc/*' -not -path '*/.debug/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$G/lib:$cuda_libs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export NDSERVE_SOURCE_DIR="$PWD"
{ nvidia-smi; echo "cuBLAS from: $cuda_libs"; nproc; } 2>&1 | tee "$W/machine.txt"
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
  echo "$1: skipped, $((BUDGET_S - SECONDS)) s of the budget left" | tee -a "$W/times.txt"
  return 1
}
mark() {  # mark <what>: the driver's view of used memory and the elapsed time
  echo "$1: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>&1 | head -1)" \
    >>"$W/memory.txt"
  echo "$1: $((SECONDS - t0)) s" >>"$W/times.txt"
  tar -C "$W" -czf "$OUT/gpu-out.tar.gz.tmp" . && mv "$OUT/gpu-out.tar.gz.tmp" "$OUT/gpu-out.tar.gz"
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
  { echo "== $t: $(grep -E '^\[  PASSED  \] [0-9]+ test' "/tmp/$t.txt"), $(grep -cE '^\[  FAILED  \] .*\(' "/tmp/$t.txt") failed"
    cat "/tmp/$t.txt"; } >"$W/tests_$t.txt"
  grep -E '^\[  (PASSED|FAILED|SKIPPED)' "/tmp/$t.txt" | head -20
  grep -hE 'max abs diff|driver-visible' "/tmp/$t.txt" >>"$W/gpu_figures.txt"
}
cuda_cases='*cuda*:*Cuda*:*CUDA*:*Gpu*:*GPU*'
# The correctness-only binaries share the GPU at once (16 host cores); gpu_engine_tests
# runs alone after them, since its driver-visible memory check reads the whole device.
run_tests gpu_memory_tests 60 &
run_tests kernels_tests 120 --gtest_filter="$cuda_cases" &
run_tests engine_tests 150 --gtest_filter="$cuda_cases" &
# Training sessions on cuda:0 against the CPU session and PyTorch (train/compute.h).
NDSERVE_TRAIN_FIXTURES=$G/train_fixtures run_tests train_tests 120 --gtest_filter="$cuda_cases" &
# The PyTorch exports carried in .gpu/torch (scripts/gpu-bundle.sh TORCH_MODELS=...):
# their cuda:0 cases through the engine and, as a daemon on cuda:0, through gRPC.
if [[ -f $TORCH_DIR/DONE ]]; then
  NDSERVE_TORCH_FIXTURES=$TORCH_DIR run_tests torch_model_tests 150 --gtest_filter='*cuda*' &
  NDSERVE_TORCH_FIXTURES=$TORCH_DIR NDSERVE_TEST_DEVICE=cuda:0 NDSERVED=$G/bin/ndserved \
    run_tests torch_daemon_test 150 &
fi
wait
mark "after correctness tests"
run_tests gpu_engine_tests 180
# A training session through the daemon on cuda:0 with the bundled CLI: start, steps,
# commit as version 2, an inference on it (scripts/train-smoke.sh; a few seconds).
if has_time "train smoke"; then
  BIN_DIR=$G/bin DEVICE=cuda:0 timeout "$(cap 60)" bash scripts/train-smoke.sh \
    >"$W/train_smoke.txt" 2>&1 || rc=1
  tail -3 "$W/train_smoke.txt"
fi
mark "after tests"
# Pools over the CUDA allocator against raw cudaMalloc/cudaFree, the scope benchmark,
# and the engine on cuda:0: one predictor with graphs on (and, in the same call, the
# kernels-only floor of a plain run), the same without cuBLASLt's fused bias and Relu
# (that fusion's baseline), with graphs off (the replay's baseline), then
# BENCH_INSTANCES predictors with graphs on.
{
  [[ ${SKIP_POOLS:-0} != 1 ]] && has_time pool_benchmark &&
    NDSERVE_BENCH_DEVICE=cuda:0 timeout "$(cap 60)" "$G/bin/pool_benchmark" \
      --benchmark_min_time=0.1 --benchmark_filter="${POOL_FILTER:-.}"
  [[ ${SKIP_POOLS:-0} != 1 ]] && has_time manager_benchmark &&
    NDSERVE_BENCH_DEVICE=cuda:0 timeout "$(cap 60)" "$G/bin/manager_benchmark" \
      --benchmark_min_time=0.1
  for run in "1 1 1" "1 1 0" "1 0 1" "${BENCH_INSTANCES:-4} 1 1"; do
    [[ ${SKIP_ENGINE_BENCH:-0} == 1 ]] && break
    read -r n graphs lt <<<"$run"
    has_time "engine_benchmark $run" || continue
    echo "== engine on cuda:0, $n predictor(s) per model, CUDA graphs $([[ $graphs == 1 ]] && echo on || echo off), cuBLASLt epilogue $([[ $lt == 1 ]] && echo on || echo off)"
    NDSERVE_BENCH_DEVICE=cuda:0 NDSERVE_BENCH_INSTANCES=$n NDSERVE_BENCH_CUDA_GRAPHS=$graphs \
      NDSERVE_BENCH_CUBLASLT=$lt timeout "$(cap 90)" "$G/bin/engine_benchmark" \
      --benchmark_min_time=0.2 \
      --benchmark_filter="$([[ $n == 1 && $graphs == 1 ]] && echo 'engine/|kernels/' || echo 'engine/')"
  done
  # Training steps of a session on cuda:0 (batch 256, SGD), then the same session on the
  # CPU in the same call as its baseline.
  for dev in cuda:0 cpu; do
    has_time "train_benchmark $dev" || continue
    echo "== training session steps on $dev"
    NDSERVE_BENCH_DEVICE=$dev OPENBLAS_NUM_THREADS=1 timeout "$(cap 40)" \
      "$G/bin/train_benchmark" --benchmark_filter=Session --benchmark_min_time=1
  done
} 2>&1 | grep -v '^I' | tee "$W/benchmarks_cuda.txt"
mark "after benchmarks"
# Where a plain run's time goes on the device: every kernel and copy of a few mlp and
# recsys batch-1 runs with Nsight Compute's duration (kernels_profile.txt), to set
# beside the engine rows above.
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [[ ${SKIP_PROFILE:-0} != 1 && -n $ncu_bin ]] && has_time "kernel profile"; then
  for m in mlp recsys; do
    echo "== $m b1, graphs off: kernels of the runs after the first 30 launches"
    NDSERVE_BENCH_DEVICE=cuda:0 NDSERVE_BENCH_CUDA_GRAPHS=0 timeout "$(cap 60)" \
      "$ncu_bin" --metrics gpu__time_duration.sum --csv --launch-skip 30 --launch-count 40 \
      "$G/bin/engine_benchmark" --benchmark_filter="^engine/$m/1/real_time\$" \
      --benchmark_min_time=0.05 2>&1 | grep -E '^"' | head -80
  done >"$W/kernels_profile.txt" 2>&1
  mark "after kernel profile"
fi
fi
# Load test: scripts/loadtest-bench.sh with the bundle's binaries, the daemon on cuda:0,
# against the bare echo server on the same machine in the same run.
cpus=$(nproc)
if [[ ${PIN:-1} == 1 && -z ${SERVER_CPUS:-}${CLIENT_CPUS:-} ]] && ((cpus >= 8)); then
  export SERVER_CPUS=0-$((cpus * 3 / 4 - 1)) CLIENT_CPUS=$((cpus * 3 / 4))-$((cpus - 1))
fi
if [[ ${SKIP_LOADTEST:-0} != 1 ]] && has_time "load test"; then
BIN_DIR=$G/bin MODEL_REPOSITORY=examples/models DEVICE=cuda:0 RESULTS_DIR=/tmp/ndserve-lt \
  REPORT_ONLY=1 DURATION_S=${DURATION_S:-10} timeout "$(cap 300)" bash scripts/loadtest-bench.sh \
  "$W/loadtest.md" >"$W/loadtest.log" 2>&1 || rc=1
cp /tmp/ndserve-lt/ndserved.log /tmp/ndserve-lt/device_allocs.txt /tmp/ndserve-lt/server_times.txt "$W/" 2>/dev/null
mark "after load test"
# The same load with LOADTEST_INSTANCES predictors per model (the example configs
# have one), when set: does a GPU serve more requests with more instances?
if [[ -n ${LOADTEST_INSTANCES:-} ]] && has_time "load test with instances"; then
  rm -rf /tmp/ndserve-models && cp -r examples/models /tmp/ndserve-models
  sed -i "s/count: 1/count: $LOADTEST_INSTANCES/" /tmp/ndserve-models/*/config.pbtxt
  BIN_DIR=$G/bin MODEL_REPOSITORY=/tmp/ndserve-models DEVICE=cuda:0 RESULTS_DIR=/tmp/ndserve-lt2 \
    REPORT_ONLY=1 DURATION_S=${DURATION_S:-10} timeout "$(cap 300)" bash scripts/loadtest-bench.sh \
    "$W/loadtest_instances.md" >>"$W/loadtest.log" 2>&1 || rc=1
  cp /tmp/ndserve-lt2/ndserved.log "$W/ndserved_instances.log" 2>/dev/null
  cat "$W/loadtest_instances.md"
fi
# The same load with idle ModelInfer workers spinning LOADTEST_SPIN_US before they
# sleep (--infer_worker_spin_us), when set: what a thread wake-up per request costs here.
if [[ -n ${LOADTEST_SPIN_US:-} ]] && has_time "load test with spinning workers"; then
  # The echo rows of the first load test are this table's baseline too.
  mkdir -p /tmp/ndserve-lt3 && cp /tmp/ndserve-lt/echo-*.json /tmp/ndserve-lt3/ 2>/dev/null
  NDSERVE_INFER_WORKER_SPIN_US=$LOADTEST_SPIN_US SKIP_ECHO=1 BIN_DIR=$G/bin \
    MODEL_REPOSITORY=examples/models DEVICE=cuda:0 RESULTS_DIR=/tmp/ndserve-lt3 REPORT_ONLY=1 \
    DURATION_S=${DURATION_S:-10} \
    timeout "$(cap 300)" bash scripts/loadtest-bench.sh "$W/loadtest_spin.md" >>"$W/loadtest.log" 2>&1 || rc=1
  cp /tmp/ndserve-lt3/server_times.txt "$W/server_times_spin.txt" 2>/dev/null
  cat "$W/loadtest_spin.md"
  mark "after load test with spinning workers"
fi
cat "$W/loadtest.md"
fi
mark end
cat "$W/memory.txt" "$W/times.txt" "$W/gpu_figures.txt" 2>/dev/null
# Background test steps cannot set rc: their logs say whether they failed.
if grep -h '^\[  FAILED  \]' "$W"/tests_*.txt 2>/dev/null | sort -u | head -60 | grep .; then rc=1; fi
exit $rc
