#!/usr/bin/env bash
# Serving latency of one model while another is fine-tuned in the same daemon: mlp batch 1,
# closed loop, measured once with the daemon idle otherwise and once while
# examples/train/finetune_recsys.py streams Adam steps (batch 256) to the Trainer service,
# in one run on one daemon (docs/design.md §10.1). Works on a temporary copy of the
# example repository, so no committed version is written into examples/.
#
#   scripts/train-serving-bench.sh   # prints a markdown table
#
# Environment: BIN_DIR=build, DURATION_S=15, CONCURRENCY=8, PORT_BASE=18500.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN_DIR=${BIN_DIR:-build}
DURATION_S=${DURATION_S:-15}
CONCURRENCY=${CONCURRENCY:-8}
PORT_BASE=${PORT_BASE:-18500}
grpc=127.0.0.1:$PORT_BASE
admin=127.0.0.1:$((PORT_BASE + 1))
export NDSERVE_PROTO_PYTHON_DIR=${NDSERVE_PROTO_PYTHON_DIR:-$BIN_DIR/proto/python}

repo=$(mktemp -d)
cp -r examples/models/mlp examples/models/recsys "$repo/"
"$BIN_DIR/server/ndserved" --model_repository="$repo" --device=cpu --grpc_address="$grpc" \
  --http_address= --metrics_address=127.0.0.1:$((PORT_BASE + 2)) --admin_address="$admin" \
  >"$repo/ndserved.log" 2>&1 &
daemon_pid=$!
trainer_pid=
cleanup() {
  [[ -n $trainer_pid ]] && kill "$trainer_pid" 2>/dev/null
  kill "$daemon_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$repo"
}
trap cleanup EXIT
for _ in $(seq 300); do
  "$BIN_DIR/server/ndserve-cli" health --server="$grpc" >/dev/null 2>&1 && break
  sleep 0.2
done

measure() {
  local out
  out=$("$BIN_DIR/loadtest/ndserve-loadtest" --address="$grpc" --model=mlp --batch=1 \
    --concurrency="$CONCURRENCY" --duration_s="$DURATION_S" --warmup_s=1 --admin_address= \
    --metrics_address=)
  local rps p50 p99
  rps=$(sed -n 's/^throughput: \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  p50=$(sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' <<<"$out")
  p99=$(sed -n 's/.* p99 \([0-9.]*\) ms.*/\1/p' <<<"$out")
  echo "| $1 | $rps | $p50 | $p99 |"
}

echo "| mlp served while | req/s | p50 ms | p99 ms |"
echo "|---|---|---|---|"
measure "nothing else runs"
/usr/bin/python3 examples/train/finetune_recsys.py --server="$grpc" --admin="$admin" \
  --steps=100000 >"$repo/finetune.log" 2>&1 &
trainer_pid=$!
# Past the held-out scoring and StartSession: steps are streaming once the first is logged.
for _ in $(seq 600); do grep -q "^step 1:" "$repo/finetune.log" && break; sleep 0.1; done
grep -q "^step 1:" "$repo/finetune.log" || { cat "$repo/finetune.log" >&2; exit 1; }
measure "recsys fine-tunes (Adam, batch 256)"
steps=$(curl -sf "http://127.0.0.1:$((PORT_BASE + 2))/metrics" |
  sed -n 's/^ndserve_train_steps_total{[^}]*} \([0-9.e+]*\)$/\1/p' | head -1)
echo
echo "training steps completed by the end: ${steps:-unknown}"
