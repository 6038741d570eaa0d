#!/usr/bin/env bash
# A fine-tuning session through a live daemon with the bundled CLI (docs/design.md §10.1),
# end to end on one device: ndserved serves a copy of the example mlp on $DEVICE, a
# session trains it (Adam, random batches), commits it as version 2, and version 2
# answers an inference. Prints every step's result; exits non-zero at the first failure.
# scripts/gpu-run.sh runs it on cuda:0 (the session then runs on the GPU, train/compute.h);
# on the CPU it is the same path the Python trainer test takes.
#   BIN_DIR (build/server): where ndserved and ndserve-cli are
#   DEVICE (cpu)   PORT_BASE (18300): gRPC +1, metrics +2, admin +3   STEPS (30)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-build/server}
DEVICE=${DEVICE:-cpu}
PORT_BASE=${PORT_BASE:-18300}
STEPS=${STEPS:-30}
grpc=127.0.0.1:$((PORT_BASE + 1))
admin=127.0.0.1:$((PORT_BASE + 3))
cli=("$BIN_DIR/ndserve-cli" --server="$grpc" --admin="$admin")
# Commit writes version 2 into the repository: a copy, never examples/.
repo=$(mktemp -d /tmp/ndserve-train-smoke.XXXXXX)
cp -r examples/models/mlp "$repo/"
"$BIN_DIR/ndserved" --model_repository="$repo" --device="$DEVICE" --grpc_address="$grpc" \
  --metrics_address=127.0.0.1:$((PORT_BASE + 2)) --admin_address="$admin" --http_address= \
  >"$repo/ndserved.log" 2>&1 &
pid=$!
finish() {
  kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [[ ${1:-0} == 0 ]] || tail -20 "$repo/ndserved.log" >&2
  rm -rf "$repo"
}
trap 'finish $?' EXIT
for _ in $(seq 1 150); do
  "${cli[@]}" health 2>/dev/null | grep -q "readiness: SERVING" && break
  kill -0 "$pid" 2>/dev/null || { echo "train-smoke: ndserved exited" >&2; exit 1; }
  sleep 0.2
done
session=$("${cli[@]}" train start --model=mlp --target_output=fc2 --optimizer=adam --lr=0.01)
echo "train-smoke: session $session on $DEVICE"
"${cli[@]}" train step --session="$session" --steps="$STEPS" input:FP32:32x64:random \
  --labels=labels:INT64:32:random --random_max=10
"${cli[@]}" train commit --session="$session"
"${cli[@]}" infer --model=mlp --model_version=2 input:FP32:1x64:zeros
echo "train-smoke: ok"
