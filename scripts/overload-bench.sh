#!/usr/bin/env bash
# Open-loop overload test of ndserved's queue policy (docs/design.md §5): measures the
# capacity of recsys batch 1 in closed loop, offers 3x that rate in open loop, then
# measures closed loop again (recovery). The model gathers for 1 ms, keeps at most
# MAX_QUEUE requests waiting and drops those queued longer than TIMEOUT_US, so admitted
# requests keep a bounded latency and the rest are refused at once with UNAVAILABLE (or
# DEADLINE_EXCEEDED); RSS must stay flat.
#
#   scripts/overload-bench.sh            # prints a markdown table
#
# Environment: BIN_DIR=build (ndserved in server/, ndserve-loadtest in loadtest/),
# DURATION_S=10, CONCURRENCY=16 (closed loop), FACTOR=3, MAX_QUEUE=64,
# TIMEOUT_US=100000, PORT_BASE=18300, RESULTS_DIR=$BIN_DIR/overload-bench, DAEMON_FLAGS (extra
# ndserved flags, e.g. "--max_pending_infer=64").
set -euo pipefail
cd "$(dirname "$0")/.."

BIN_DIR=${BIN_DIR:-build}
DURATION_S=${DURATION_S:-10}
CONCURRENCY=${CONCURRENCY:-16}
FACTOR=${FACTOR:-3}
MAX_QUEUE=${MAX_QUEUE:-64}
TIMEOUT_US=${TIMEOUT_US:-100000}
PORT_BASE=${PORT_BASE:-18300}
RESULTS_DIR=${RESULTS_DIR:-$BIN_DIR/overload-bench}
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

model=examples/models/recsys/1/model.onnx
[[ -f $model ]] || { echo "missing $model: run /usr/bin/python3 tools/gen_models.py" >&2; exit 1; }
rm -rf "$RESULTS_DIR"
mkdir -p "$RESULTS_DIR"
repo=$(mktemp -d /tmp/ndserve-overload-bench-XXXXXX)
daemon_pid=
cleanup() {
  [[ -n $daemon_pid ]] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$repo"
}
trap cleanup EXIT

mkdir -p "$repo/recsys/1"
ln -s "$PWD/$model" "$repo/recsys/1/model.onnx"
cat >"$repo/recsys/config.pbtxt" <<CONFIG
name: "recsys"
max_batch_size: 64
input [ { name: "sparse_ids" data_type: TYPE_INT64 dims: [ 4, 8 ] },
        { name: "dense" data_type: TYPE_FP32 dims: [ 13 ] } ]
output [ { name: "score" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching {
  max_queue_delay_microseconds: 1000
  default_queue_policy { max_queue_size: $MAX_QUEUE default_timeout_microseconds: $TIMEOUT_US }
}
CONFIG

grpc=127.0.0.1:$((PORT_BASE + 1))
"$BIN_DIR/server/ndserved" --model_repository="$repo" --device=cpu --grpc_address="$grpc" \
  --metrics_address=127.0.0.1:$((PORT_BASE + 2)) --admin_address=127.0.0.1:$((PORT_BASE + 3)) \
  --http_address= ${DAEMON_FLAGS:-} >"$RESULTS_DIR/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1200); do
  grep -q "\] ready" "$RESULTS_DIR/daemon.log" 2>/dev/null && break
  sleep 0.1
done

run() {  # run NAME LOADTEST-FLAGS...
  local name=$1
  shift
  "$BIN_DIR/loadtest/ndserve-loadtest" --address="$grpc" --admin_address=127.0.0.1:$((PORT_BASE + 3)) \
    --model=recsys --daemon_pid="$daemon_pid" --duration_s="$DURATION_S" \
    --json_out="$RESULTS_DIR/$name.json" "$@" >"$RESULTS_DIR/$name.txt" 2>&1 || true
}

run warmup --concurrency="$CONCURRENCY" --duration_s=2
run capacity --concurrency="$CONCURRENCY"
capacity=$($PY -c "import json; print(json.load(open('$RESULTS_DIR/capacity.json'))['throughput_rps'])")
rate=$($PY -c "print(int($capacity * $FACTOR))")
run overload --rate="$rate"
run recovery --concurrency="$CONCURRENCY"

$PY - "$RESULTS_DIR" "$rate" <<'REPORT'
import json, sys
d, rate = sys.argv[1], sys.argv[2]
print(f"| run | offered | ok/s | ok p50 ms | ok p99 ms | ok max ms | errors by code | RSS delta |")
print("|---|---|---|---|---|---|---|---|")
for name, offered in (("capacity", "closed loop"), ("overload", f"{rate} req/s open loop"),
                      ("recovery", "closed loop")):
    r = json.load(open(f"{d}/{name}.json"))
    lat = r["latency_ms"]
    ok_rate = r["ok"] / r["elapsed_s"]
    errors = ", ".join(f"{k} {v}" for k, v in r.get("errors_by_code", {}).items()) or "none"
    rss = r.get("rss_delta_bytes", "-")
    if isinstance(rss, (int, float)):
        rss = f"{rss / 2**20:+.1f} MiB"
    print(f"| {name} | {offered} | {ok_rate:.0f} | {lat['p50']:.2f} | {lat['p99']:.2f} | "
          f"{lat['max']:.2f} | {errors} | {rss} |")
REPORT
