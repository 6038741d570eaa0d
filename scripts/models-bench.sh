#!/usr/bin/env bash
# ndserve's engine against ONNX Runtime, in-process on the CPU, on the same model files and
# the same input bytes; prints a markdown table. A benchmark, not a test: not run by CI.
#
#   scripts/models-bench.sh                 # every row, 5 s per row and runtime
#   SECONDS_PER_ROW=2 scripts/models-bench.sh resnet18 mlp   # rows of these models only
#   scripts/models-bench.sh --verify        # ORT's outputs vs. every PyTorch reference
#   BASE_BUILD_DIR=../base/build scripts/models-bench.sh bert_encoder   # and a baseline build
#
# --verify checks the fixtures rather than ndserve: a correct runtime must match
# PyTorch on every input set of every export (so the dynamic shapes really are dynamic).
#
# ndserve: build/benchmarks/models_benchmark (ServedModel::Infer, as the daemon runs a
# request, without gRPC), OpenBLAS limited to $THREADS threads. ONNX Runtime:
# benchmarks/ort/ort_bench.js (onnxruntime-node 1.30, CPU provider, intraOpNumThreads
# $THREADS, graph optimizations on). For each row ndserve runs first, then ORT, so both
# see the same machine load. The PyTorch rows use the fixtures of
# tools/gen_torch_models.py (made here if missing); the example rows use examples/models
# and the reference inputs of tests/fixtures/models, rows repeated to the batch.
# A row whose model ndserve cannot load yet says so instead of a number.
# BASE_BUILD_DIR: the build directory of another checkout (main's, say; built there, never
# here): each row then runs its models_benchmark right before this build's, so the two
# builds and ORT are measured one after the other per row, and the table gets its column.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BASE_BUILD_DIR=${BASE_BUILD_DIR:-}
if [[ -n $BASE_BUILD_DIR && ! -x $BASE_BUILD_DIR/benchmarks/models_benchmark ]]; then
  echo "models-bench: no $BASE_BUILD_DIR/benchmarks/models_benchmark (build it there first)" >&2
  exit 1
fi
SECONDS_PER_ROW=${SECONDS_PER_ROW:-5}
THREADS=${THREADS:-2}
PY=/usr/bin/python3

command -v node > /dev/null || { echo "models-bench: needs node and npm (Debian: nodejs npm)" >&2; exit 1; }

fixtures=$($PY tools/gen_torch_models.py --print-dir)
if [[ ! -f $fixtures/DONE ]]; then
  echo "models-bench: making the PyTorch fixtures in $fixtures" >&2
  $PY tools/gen_torch_models.py --out "$fixtures" >&2
fi
if [[ ! -d benchmarks/ort/node_modules/onnxruntime-node ]]; then
  # The package's install script only fetches a CUDA add-on; the CPU binding ships inside.
  (cd benchmarks/ort && npm install --ignore-scripts --no-audit --no-fund >&2)
fi
if [[ ${1:-} == --verify ]]; then
  failed=0
  for case_dir in "$fixtures"/*/cases/*/; do
    model_dir=$(dirname "$(dirname "$case_dir")")
    if out=$(node benchmarks/ort/ort_bench.js --model "$model_dir/1/model.onnx" \
               --case "$case_dir" --verify --threads "$THREADS"); then
      echo "ok   ${case_dir#"$fixtures"/}"
    else
      echo "FAIL ${case_dir#"$fixtures"/}: $out"
      failed=1
    fi
  done
  exit $failed
fi

[[ -f $BUILD_DIR/build.ninja ]] || cmake -S . -B "$BUILD_DIR" -G Ninja >&2
ninja -C "$BUILD_DIR" -j "${JOBS:-2}" models_benchmark example_models >&2

# label batch model-dir case-dir
ROWS=(
  "resnet18 1 $fixtures/resnet18 $fixtures/resnet18/cases/b1"
  "resnet18 8 $fixtures/resnet18 $fixtures/resnet18/cases/b8"
  "mobilenet_v2 1 $fixtures/mobilenet_v2 $fixtures/mobilenet_v2/cases/b1"
  "mobilenet_v3_small 1 $fixtures/mobilenet_v3_small $fixtures/mobilenet_v3_small/cases/b1"
  "efficientnet_b0 1 $fixtures/efficientnet_b0 $fixtures/efficientnet_b0/cases/b1"
  "bert_encoder(seq32) 8 $fixtures/bert_encoder $fixtures/bert_encoder/cases/b8_s32"
  "bert_encoder(seq128) 1 $fixtures/bert_encoder $fixtures/bert_encoder/cases/b1_s128"
  "gpt_decoder(seq32) 8 $fixtures/gpt_decoder $fixtures/gpt_decoder/cases/b8_s32"
  "lstm_classifier(seq32) 1 $fixtures/lstm_classifier $fixtures/lstm_classifier/cases/b1_s32"
  "mlp 1 examples/models/mlp tests/fixtures/models/mlp/reference"
  "mlp 16 examples/models/mlp tests/fixtures/models/mlp/reference"
  "mlp 256 examples/models/mlp tests/fixtures/models/mlp/reference"
  "recsys 16 examples/models/recsys tests/fixtures/models/recsys/reference"
  "recsys 256 examples/models/recsys tests/fixtures/models/recsys/reference"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$work/results.jsonl
for row in "${ROWS[@]}"; do
  read -r label batch model_dir case_dir <<< "$row"
  if (($# > 0)); then
    wanted=0
    for m in "$@"; do [[ ${label%%(*} == "$m" ]] && wanted=1; done
    ((wanted)) || continue
  fi
  echo "models-bench: $label b$batch" >&2
  echo '{"benchmarks": []}' > "$work/base.json"
  if [[ -n $BASE_BUILD_DIR ]]; then
    OPENBLAS_NUM_THREADS=$THREADS "$BASE_BUILD_DIR/benchmarks/models_benchmark" \
      "--row=$(realpath "$model_dir"),$case_dir,$batch" --benchmark_min_time="$SECONDS_PER_ROW" \
      --benchmark_format=json > "$work/base.json" 2> "$work/base.err" ||
      echo "models-bench: baseline models_benchmark failed: $(tail -n 3 "$work/base.err")" >&2
  fi
  OPENBLAS_NUM_THREADS=$THREADS "$BUILD_DIR/benchmarks/models_benchmark" \
    "--row=$(realpath "$model_dir"),$case_dir,$batch" --benchmark_min_time="$SECONDS_PER_ROW" \
    --benchmark_format=json > "$work/ndserve.json" 2> "$work/ndserve.err" ||
    echo "models-bench: models_benchmark failed: $(tail -n 3 "$work/ndserve.err")" >&2
  node benchmarks/ort/ort_bench.js --model "$model_dir/1/model.onnx" --case "$case_dir" \
    --batch "$batch" --seconds "$SECONDS_PER_ROW" --threads "$THREADS" \
    > "$work/ort.json" 2> "$work/ort.err" ||
    echo "models-bench: ort_bench failed: $(tail -n 3 "$work/ort.err")" >&2
  $PY - "$label" "$batch" "$work/ndserve.json" "$work/ort.json" "$work/base.json" >> "$results" << 'EOF'
import json, sys
label, batch, nd_path, ort_path, base_path = sys.argv[1:]
row = {"label": label, "batch": int(batch), "ndserve": None, "ort": None, "note": "", "base": None}
try:
    base = json.load(open(base_path))["benchmarks"]
    if base and not base[0].get("error_occurred"):
        row["base"] = base[0]["rows/s"]
except (OSError, ValueError, KeyError) as e:
    row["note"] += f" baseline gave no result ({e})"
try:
    bench = json.load(open(nd_path))["benchmarks"][0]
    if bench.get("error_occurred"):
        msg = bench.get("error_message", "")
        if msg.startswith("cannot load:"):
            # The loader's message names the node; keep that part.
            row["note"] = "cannot load yet: " + (msg[msg.find("node '"):] if "node '" in msg else msg)
        else:
            row["note"] = "failed: " + msg
    else:
        row["ndserve"] = bench["rows/s"]
except (OSError, ValueError, KeyError, IndexError) as e:
    row["note"] = f"models_benchmark gave no result ({e})"
try:
    row["ort"] = json.load(open(ort_path))["rows_per_s"]
except (OSError, ValueError, KeyError) as e:
    row["note"] += f" ORT gave no result ({e})"
print(json.dumps(row))
EOF
done

$PY - "$results" "$THREADS" "$SECONDS_PER_ROW" "$BASE_BUILD_DIR" << 'EOF'
import json, sys
path, threads, seconds, base_dir = sys.argv[1:]
print(f"\nCPU, {threads} threads each, {seconds} s per row and runtime; rows/s (higher is better)\n")
if base_dir:
    print(f"baseline: {base_dir}\n")
    print("| model | batch | baseline rows/s | ndserve rows/s | ORT rows/s | baseline / ORT | ndserve / ORT |")
    print("|---|---:|---:|---:|---:|---:|---:|")
else:
    print("| model | batch | ndserve rows/s | ORT rows/s | ndserve / ORT |")
    print("|---|---:|---:|---:|---:|")
for line in open(path):
    r = json.loads(line)
    nd = f"{r['ndserve']:,.0f}" if r["ndserve"] else r["note"]
    ort = f"{r['ort']:,.0f}" if r["ort"] else "-"
    ratio = f"{r['ndserve'] / r['ort']:.2f}" if r["ndserve"] and r["ort"] else "-"
    if base_dir:
        base = f"{r['base']:,.0f}" if r.get("base") else "-"
        base_ratio = f"{r['base'] / r['ort']:.2f}" if r.get("base") and r["ort"] else "-"
        print(f"| {r['label']} | {r['batch']} | {base} | {nd} | {ort} | {base_ratio} | {ratio} |")
    else:
        print(f"| {r['label']} | {r['batch']} | {nd} | {ort} | {ratio} |")
EOF
