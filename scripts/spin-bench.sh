#!/usr/bin/env bash
# ndserved under closed-loop load at several intra-op spin budgets, same binary: one daemon
# per budget (NDSERVE_INTRA_OP_SPIN_US), each running every concurrency of one model, the
# budgets in the order given (alternate them: 200 0 200 0). Prints one line per run:
# throughput, p50/p99 and the daemon's CPU time per request (utime + stime of
# /proc/<pid>/stat around the measured run, which has no warm-up or memory probe inside).
# A benchmark, not a test. Keep one call short and hold the bench lock around it:
#
#   flock /work/bench.lock chrt -f 10 scripts/spin-bench.sh mlp 1 "1 8 64" "200 0 200 0"
#
#   scripts/spin-bench.sh MODEL BATCH "CONCURRENCIES" "SPIN_US..."
#
# Environment: BUILD_DIR=build (ndserved and ndserve-loadtest from there),
# MODEL_REPOSITORY=examples/models, INPUT= (ndserve-loadtest --input; empty: the model's
# metadata), LOADTEST_FLAGS= (more ndserve-loadtest flags), DURATION_S=4, WARMUP_S=1, PORT_BASE=18400, RESULTS= (append JSON lines here).
set -euo pipefail
cd "$(dirname "$0")/.."

model=$1 batch=$2 concurrencies=$3 spins=$4
BUILD_DIR=${BUILD_DIR:-build}
MODEL_REPOSITORY=${MODEL_REPOSITORY:-examples/models}
INPUT=${INPUT:-}
DURATION_S=${DURATION_S:-4}
WARMUP_S=${WARMUP_S:-1}
PORT_BASE=${PORT_BASE:-18400}
RESULTS=${RESULTS:-}
DAEMON=$BUILD_DIR/server/ndserved
LOADTEST=$BUILD_DIR/loadtest/ndserve-loadtest
GRPC_ADDR=127.0.0.1:$((PORT_BASE + 1))
work=$(mktemp -d)
TICKS=$(getconf CLK_TCK)

source scripts/daemon-proc.sh
trap 'stop_server; rm -rf "$work"' EXIT

# utime + stime of the daemon, all its threads, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }

input_flag=()
[[ -n $INPUT ]] && input_flag=(--input="$INPUT")
read -r -a extra_flags <<< "${LOADTEST_FLAGS:-}"
loadtest() {
  "$LOADTEST" --address="$GRPC_ADDR" --model="$model" --batch="$batch" "${input_flag[@]}" \
    "${extra_flags[@]}" --admin_address= --metrics_address= --wait_ready_s=60 "$@"
}

for spin in $spins; do
  NDSERVE_INTRA_OP_SPIN_US=$spin "$DAEMON" --model_repository="$MODEL_REPOSITORY" \
    --device=cpu --grpc_address="$GRPC_ADDR" --metrics_address=127.0.0.1:$((PORT_BASE + 2)) \
    --admin_address=127.0.0.1:$((PORT_BASE + 3)) --http_address= > "$work/ndserved.log" 2>&1 &
  server_pid=$!
  for conc in $concurrencies; do
    loadtest --concurrency="$conc" --duration_s="$WARMUP_S" --warmup_s=0 > /dev/null 2>&1 ||
      { echo "spin-bench: warm-up failed: $(tail -n 3 "$work/ndserved.log")" >&2; exit 1; }
    before=$(cpu_ticks)
    loadtest --concurrency="$conc" --duration_s="$DURATION_S" --warmup_s=0 \
      --json_out="$work/run.json" > "$work/run.txt" 2>&1 || true
    after=$(cpu_ticks)
    /usr/bin/python3 - "$work/run.json" "$model" "$batch" "$conc" "$spin" "$before" "$after" \
      "$TICKS" "$RESULTS" << 'EOF'
import json, sys
path, model, batch, conc, spin, before, after, ticks, results = sys.argv[1:]
r = json.load(open(path))
cpu_s = (int(after) - int(before)) / int(ticks)
row = {"model": model, "batch": int(batch), "concurrency": int(conc), "spin_us": int(spin),
       "rps": r["throughput_rps"], "p50_ms": r["latency_ms"]["p50"],
       "p99_ms": r["latency_ms"]["p99"], "ok": r["ok"], "errors": r["errors"],
       "cpu_s": cpu_s, "cpu_us_per_req": 1e6 * cpu_s / max(1, r["ok"])}
print(f"{model} b{batch} c{conc} spin {spin:>3} us: {row['rps']:8.0f} req/s  "
      f"p50 {row['p50_ms']:7.3f} ms  p99 {row['p99_ms']:7.3f} ms  "
      f"cpu {row['cpu_us_per_req']:8.1f} us/req  errors {row['errors']}")
if results:
    with open(results, "a") as f:
        f.write(json.dumps(row) + "\n")
EOF
  done
  stop_server
done
