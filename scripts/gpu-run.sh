#!/usr/bin/env bash
# DESIGN.md §6, step 2 (on the GPU machine, from the repo root with .gpu/ carried):
# GPU tests, the pool benchmark over cudaMalloc, and a short load test. Output goes to
# $OUT when set (the device tool brings it back), else to .gpu/out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.gpu/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
export NDSERVE_SOURCE_DIR="$PWD"
nvidia-smi | tee "$OUT/nvidia-smi.txt"
rc=0
for t in gpu_memory_tests kernels_tests engine_tests; do
  [[ -x .gpu/bin/$t ]] || continue
  .gpu/bin/$t 2>&1 | tee "$OUT/$t.txt" | tail -5 || rc=1
done
# Pools over the CUDA allocator against raw cudaMalloc/cudaFree, same run.
NDSERVE_BENCH_DEVICE=cuda:0 .gpu/bin/pool_benchmark --benchmark_min_time=0.2 \
  --benchmark_filter='Pair|Window' 2>&1 | grep -v '^I' | tee "$OUT/pool_benchmark_cuda.txt"
if [[ -x .gpu/bin/ndserved && -x .gpu/bin/ndserve-loadtest ]]; then
  .gpu/bin/ndserved --model_repository=.gpu/models --device=cuda:0 \
    --grpc_address=127.0.0.1:18001 --metrics_address=127.0.0.1:18002 \
    --admin_address=127.0.0.1:18003 >"$OUT/ndserved.log" 2>&1 &
  pid=$!
  sleep 5
  .gpu/bin/ndserve-loadtest --address=127.0.0.1:18001 --admin_address=127.0.0.1:18003 \
    --model=mlp --batch=1 --concurrency=64 --duration_s=20 2>&1 | tee "$OUT/loadtest.txt"
  kill -TERM $pid; wait $pid
fi
exit $rc
