#!/usr/bin/env bash
# docs/design.md §8, step 2 (on the GPU machine, from the repo root with .gpu/ carried):
# the GPU tests (gpu_memory_tests and the CUDA cases of kernels_tests and engine_tests),
# the pool, scope and engine benchmarks on cuda:0, and a short load test of the daemon on
# cuda:0 next to the bare echo server. Output goes to $OUT when set (the device tool
# brings it back), else to .gpu/out. The recsys example model is not in git; it is
# generated here with the machine's python3 (onnx + numpy).
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
rc=0
# ONLY_LOADTEST=1 skips the tests and benchmarks (a quick rerun of the load test).
if [[ ${ONLY_LOADTEST:-0} != 1 ]]; then
for t in gpu_memory_tests kernels_tests engine_tests; do
  "$G/bin/$t" --gtest_brief=1 >"/tmp/$t.txt" 2>&1 || rc=1
  { echo "== $t: $(grep -E '^\[  (PASSED|FAILED) ' "/tmp/$t.txt" | tr '\n' ' ')"; cat "/tmp/$t.txt"; } >>"$OUT/tests.txt"
  grep -E '^\[  (PASSED|FAILED|SKIPPED)' "/tmp/$t.txt" | head -20
done
# Pools over the CUDA allocator against raw cudaMalloc/cudaFree, the scope benchmark,
# and the engine on cuda:0 (one predictor, then NDSERVE_BENCH_INSTANCES of them), same
# run, all into one file.
{
  NDSERVE_BENCH_DEVICE=cuda:0 "$G/bin/pool_benchmark" --benchmark_min_time=0.2 \
    --benchmark_filter="${POOL_FILTER:-.}"
  NDSERVE_BENCH_DEVICE=cuda:0 "$G/bin/manager_benchmark" --benchmark_min_time=0.2
  for n in 1 ${BENCH_INSTANCES:-4}; do
    echo "== engine on cuda:0, $n predictor(s) per model"
    NDSERVE_BENCH_DEVICE=cuda:0 NDSERVE_BENCH_INSTANCES=$n "$G/bin/engine_benchmark" \
      --benchmark_min_time=0.2 --benchmark_filter='engine/'
  done
} 2>&1 | grep -v '^I' | tee "$OUT/benchmarks_cuda.txt"
fi
# Load test: scripts/loadtest-bench.sh with the bundle's binaries, the daemon on cuda:0,
# against the bare echo server on the same machine in the same run.
BIN_DIR=$G/bin MODEL_REPOSITORY=examples/models DEVICE=cuda:0 RESULTS_DIR=/tmp/ndserve-lt \
  REPORT_ONLY=1 DURATION_S=${DURATION_S:-10} bash scripts/loadtest-bench.sh "$OUT/loadtest.md" \
  >"$OUT/loadtest.log" 2>&1 || rc=1
cp /tmp/ndserve-lt/ndserved.log "$OUT/" 2>/dev/null
# The same load with LOADTEST_INSTANCES predictors per model (the example configs
# have one), when set: does a GPU serve more requests with more instances?
if [[ -n ${LOADTEST_INSTANCES:-} ]]; then
  rm -rf /tmp/ndserve-models && cp -r examples/models /tmp/ndserve-models
  sed -i "s/count: 1/count: $LOADTEST_INSTANCES/" /tmp/ndserve-models/*/config.pbtxt
  BIN_DIR=$G/bin MODEL_REPOSITORY=/tmp/ndserve-models DEVICE=cuda:0 RESULTS_DIR=/tmp/ndserve-lt2 \
    REPORT_ONLY=1 DURATION_S=${DURATION_S:-10} bash scripts/loadtest-bench.sh \
    "$OUT/loadtest_instances.md" >>"$OUT/loadtest.log" 2>&1 || rc=1
  cp /tmp/ndserve-lt2/ndserved.log "$OUT/ndserved_instances.log" 2>/dev/null
  cat "$OUT/loadtest_instances.md"
fi
cat "$OUT/loadtest.md"
exit $rc
