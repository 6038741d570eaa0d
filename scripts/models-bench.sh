#!/usr/bin/env bash
# ndserve's engine against ONNX Runtime, in-process on the CPU, on the same model files and
# the same input bytes; prints a markdown table. A benchmark, not a test: not run by CI.
#
#   scripts/models-bench.sh                 # every row: 3 rounds of 2 s per runtime
#   SECONDS_PER_ROW=1 ROUNDS=5 scripts/models-bench.sh resnet18 mlp   # these models' rows
#   scripts/models-bench.sh --verify        # ORT's outputs vs. every PyTorch reference
#   BASE_BUILD_DIR=../base/build scripts/models-bench.sh bert_encoder   # and a baseline build
#
# Rounds: per row, ndserve then ORT run SECONDS_PER_ROW each, ROUNDS times over. The table
# gives each runtime's median and the median of the rounds' ndserve / ORT ratios with their
# range. On a VM whose speed flips between two levels within seconds (this project's 2-vCPU
# one moved single rows by up to 2x), a ratio from one long run of each compares whichever
# levels the two runs happened to get; the rounds' ratios compare neighbours, and their
# median is what a level change in one round does not move. Each row also shows the
# issue's target (0.8x ORT, 1.0x from batch 8) and whether the median meets it.
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
SECONDS_PER_ROW=${SECONDS_PER_ROW:-2}
ROUNDS=${ROUNDS:-3}
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
  "video_resnet_tiny 1 $fixtures/video_resnet_tiny $fixtures/video_resnet_tiny/cases/b1"
  "unet3d_tiny(16^3) 1 $fixtures/unet3d_tiny $fixtures/unet3d_tiny/cases/b1_16"
  "ssdlite_detector(320^2) 1 $fixtures/ssdlite_detector $fixtures/ssdlite_detector/cases/h320_w320"
  "embedding_bag_offsets 8 $fixtures/embedding_bag_offsets $fixtures/embedding_bag_offsets/cases/b8"
  "scripted_rnn_loop(seq11) 3 $fixtures/scripted_rnn_loop $fixtures/scripted_rnn_loop/cases/b3_s11"
  "greedy_decoder 5 $fixtures/greedy_decoder $fixtures/greedy_decoder/cases/b5"
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
  for ((round = 1; round <= ROUNDS; round++)); do
    echo '{"benchmarks": []}' > "$work/base.$round.json"
    if [[ -n $BASE_BUILD_DIR ]]; then
      OPENBLAS_NUM_THREADS=$THREADS "$BASE_BUILD_DIR/benchmarks/models_benchmark" \
        "--row=$(realpath "$model_dir"),$case_dir,$batch" --benchmark_min_time="$SECONDS_PER_ROW" \
        --benchmark_format=json > "$work/base.$round.json" 2> "$work/base.err" ||
        echo "models-bench: baseline models_benchmark failed: $(tail -n 3 "$work/base.err")" >&2
    fi
    OPENBLAS_NUM_THREADS=$THREADS "$BUILD_DIR/benchmarks/models_benchmark" \
      "--row=$(realpath "$model_dir"),$case_dir,$batch" --benchmark_min_time="$SECONDS_PER_ROW" \
      --benchmark_format=json > "$work/ndserve.$round.json" 2> "$work/ndserve.err" ||
      echo "models-bench: models_benchmark failed: $(tail -n 3 "$work/ndserve.err")" >&2
    node benchmarks/ort/ort_bench.js --model "$model_dir/1/model.onnx" --case "$case_dir" \
      --batch "$batch" --seconds "$SECONDS_PER_ROW" --threads "$THREADS" \
      > "$work/ort.$round.json" 2> "$work/ort.err" ||
      echo "models-bench: ort_bench failed: $(tail -n 3 "$work/ort.err")" >&2
  done
  $PY - "$label" "$batch" "$ROUNDS" "$work" >> "$results" << 'EOF'
import json, sys
label, batch, rounds, work = sys.argv[1:]
row = {"label": label, "batch": int(batch), "ndserve": [], "ort": [], "base": [], "note": ""}
notes = set()  # each distinct failure once, however many rounds it hit
for r in range(1, int(rounds) + 1):
    nd = ort = base = None
    try:
        b = json.load(open(f"{work}/base.{r}.json"))["benchmarks"]
        if b and not b[0].get("error_occurred"):
            base = b[0]["rows/s"]
    except (OSError, ValueError, KeyError) as e:
        notes.add(f"baseline gave no result ({e})")
    try:
        bench = json.load(open(f"{work}/ndserve.{r}.json"))["benchmarks"][0]
        if bench.get("error_occurred"):
            msg = bench.get("error_message", "")
            if msg.startswith("cannot load:"):
                # The loader's message names the node; keep that part.
                notes.add("cannot load yet: " + (msg[msg.find("node '"):] if "node '" in msg else msg))
            else:
                notes.add("failed: " + msg)
        else:
            nd = bench["rows/s"]
    except (OSError, ValueError, KeyError, IndexError) as e:
        notes.add(f"models_benchmark gave no result ({e})")
    try:
        ort = json.load(open(f"{work}/ort.{r}.json"))["rows_per_s"]
    except (OSError, ValueError, KeyError) as e:
        notes.add(f"ORT gave no result ({e})")
    # A round counts only whole: its ratios compare runs that were neighbours.
    if nd and ort:
        row["ndserve"].append(nd)
        row["ort"].append(ort)
        row["base"].append(base)
row["note"] = "; ".join(sorted(notes))
print(json.dumps(row))
EOF
done

$PY - "$results" "$THREADS" "$SECONDS_PER_ROW" "$ROUNDS" "$BASE_BUILD_DIR" << 'EOF'
import json, statistics, sys
path, threads, seconds, rounds, base_dir = sys.argv[1:]
print(f"\nCPU, {threads} threads each; per row {rounds} rounds of {seconds} s per runtime, "
      "alternating; rows/s medians (higher is better), ndserve / ORT the median of the "
      "rounds' ratios and their range\n")
# The issue's targets: 0.8x ORT per row, 1.0x from batch 8; the rows without one are
# extra models beside the required ones (label up to its "(").
UNTARGETED = {"mobilenet_v3_small", "efficientnet_b0", "video_resnet_tiny", "unet3d_tiny",
              "ssdlite_detector", "embedding_bag_offsets", "scripted_rnn_loop",
              "greedy_decoder"}
def target(r):
    if r["label"].split("(")[0] in UNTARGETED:
        return None
    return 1.0 if r["batch"] >= 8 else 0.8
def ratios(nums, dens):
    return [n / d for n, d in zip(nums, dens) if n and d]
def summary(rs):
    if not rs:
        return "-", None
    med = statistics.median(rs)
    return f"{med:.2f} ({min(rs):.2f}–{max(rs):.2f})", med
if base_dir:
    print(f"baseline: {base_dir}\n")
    print("| model | batch | baseline rows/s | ndserve rows/s | ORT rows/s | baseline / ORT | ndserve / ORT | target | met |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
else:
    print("| model | batch | ndserve rows/s | ORT rows/s | ndserve / ORT | target | met |")
    print("|---|---:|---:|---:|---:|---:|---|")
for line in open(path):
    r = json.loads(line)
    nd = f"{statistics.median(r['ndserve']):,.0f}" if r["ndserve"] else r["note"]
    ort = f"{statistics.median(r['ort']):,.0f}" if r["ort"] else "-"
    ratio, med = summary(ratios(r["ndserve"], r["ort"]))
    t = target(r)
    tcol = f"{t:.1f}" if t else "—"
    met = "—" if t is None or med is None else ("yes" if med >= t else "**no**")
    if base_dir:
        bases = [b for b in r["base"] if b]
        base = f"{statistics.median(bases):,.0f}" if bases else "-"
        base_ratio, _ = summary(ratios(r["base"], r["ort"]))
        print(f"| {r['label']} | {r['batch']} | {base} | {nd} | {ort} | {base_ratio} | {ratio} | {tcol} | {met} |")
    else:
        print(f"| {r['label']} | {r['batch']} | {nd} | {ort} | {ratio} | {tcol} | {met} |")
EOF
