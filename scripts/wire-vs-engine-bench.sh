#!/usr/bin/env bash
# One model through the wire against the engine figure, alternated: models_benchmark's row
# (ServedModel::Infer in-process, as scripts/models-bench.sh runs it), then ndserved at
# concurrency 1 under ndserve-loadtest (same shape, random values), ROUNDS times. Prints
# rows/s of each and their ratio. A benchmark, not a test; hold the bench lock around it:
#
#   flock /work/bench.lock chrt -f 10 scripts/wire-vs-engine-bench.sh FIXTURE_MODEL_DIR BATCH
#
# FIXTURE_MODEL_DIR is a tools/gen_torch_models.py model folder (1/model.onnx, cases/bN).
# Environment: BUILD_DIR=build, SECONDS_PER_RUN=4, ROUNDS=2, THREADS=2 (OpenBLAS threads
# of both), PORT_BASE=18500, NDSERVE_INTRA_OP_SPIN_US passes through to the daemon.
set -euo pipefail
cd "$(dirname "$0")/.."

model_dir=$(realpath "$1") batch=$2
model=$(basename "$model_dir")
BUILD_DIR=${BUILD_DIR:-build}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-4}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-2}
PORT_BASE=${PORT_BASE:-18500}
GRPC_ADDR=127.0.0.1:$((PORT_BASE + 1))
work=$(mktemp -d)

source scripts/daemon-proc.sh
trap 'stop_server; rm -rf "$work"' EXIT

# The daemon serves a repository holding only this model, without config.pbtxt.
mkdir -p "$work/repo/$model/1"
ln -s "$model_dir/1/model.onnx" "$work/repo/$model/1/model.onnx"
case_dir=$model_dir/cases/b$batch
[[ -d $case_dir ]] || case_dir=$model_dir/cases/b1

for round in $(seq "$ROUNDS"); do
  OPENBLAS_NUM_THREADS=$THREADS "$BUILD_DIR/benchmarks/models_benchmark" \
    "--row=$model_dir,$case_dir,$batch" --benchmark_min_time="$SECONDS_PER_RUN" \
    --benchmark_format=json > "$work/engine.json" 2> "$work/engine.err"
  engine=$(/usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["benchmarks"][0]["rows/s"])' "$work/engine.json")

  OPENBLAS_NUM_THREADS=$THREADS "$BUILD_DIR/server/ndserved" --model_repository="$work/repo" \
    --device=cpu --grpc_address="$GRPC_ADDR" --metrics_address=127.0.0.1:$((PORT_BASE + 2)) \
    --admin_address=127.0.0.1:$((PORT_BASE + 3)) --http_address= > "$work/ndserved.log" 2>&1 &
  server_pid=$!
  "$BUILD_DIR/loadtest/ndserve-loadtest" --address="$GRPC_ADDR" --model="$model" \
    --batch="$batch" --concurrency=1 --duration_s="$SECONDS_PER_RUN" --warmup_s=1 \
    --admin_address= --metrics_address= --wait_ready_s=120 --json_out="$work/wire.json" \
    > "$work/wire.txt" 2>&1 || { cat "$work/wire.txt" "$work/ndserved.log" >&2; exit 1; }
  stop_server
  /usr/bin/python3 - "$work/wire.json" "$engine" "$model" "$batch" "$round" << 'EOF'
import json, sys
path, engine, model, batch, round_ = sys.argv[1:]
r = json.load(open(path))
wire = r["throughput_rps"] * int(batch)
engine = float(engine)
print(f"{model} b{batch} round {round_}: engine {engine:8.1f} rows/s  wire c1 {wire:8.1f} rows/s "
      f"(p50 {r['latency_ms']['p50']:.2f} ms)  wire/engine {wire / engine:.3f}")
EOF
done
