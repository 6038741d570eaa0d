#!/usr/bin/env bash
# Open-loop overload test of ndserved's queue policy (docs/design.md §5): for each model,
# measures its capacity in closed loop, offers FACTOR times that rate in open loop, then
# measures closed loop again (recovery). Admitted requests must keep a bounded latency
# (about max_queue_size runs, or the queue timeout), the rest be refused at once with
# UNAVAILABLE (or DEADLINE_EXCEEDED) and counted in ndserve_inference_rejected_total,
# RSS stay flat, and the recovery run reach the capacity again.
#
# Two models, one daemon each:
#   recsys    examples/models/recsys, batch 1, gathering for 1 ms, MAX_QUEUE waiting at
#             most, TIMEOUT_US queue timeout. It runs in ~0.1 ms, so on a small machine 3x
#             its capacity saturates the client and gRPC's transport before its queue.
#   slow_mlp  tools/gen_slow_mlp.py: a few milliseconds per run on one core
#             (OPENBLAS_NUM_THREADS=1), one instance, no merging, SLOW_MAX_QUEUE waiting at
#             most (SLOW_TIMEOUT_US queue timeout, 0: none). The model is the bottleneck and
#             3x its capacity is cheap for the client: the case the queue policy is for.
#
#   scripts/overload-bench.sh            # prints a markdown table per model
#
# Environment: BIN_DIR=build (ndserved in server/, ndserve-loadtest in loadtest/),
# MODELS="recsys slow_mlp", DURATION_S=10, FACTOR=3, CONCURRENCY=16 (recsys closed loop),
# SLOW_CONCURRENCY=4, MAX_QUEUE=64, TIMEOUT_US=100000, SLOW_MAX_QUEUE=16,
# SLOW_TIMEOUT_US=0, PORT_BASE=18300, RESULTS_DIR=$BIN_DIR/overload-bench, DAEMON_FLAGS
# (extra ndserved flags, e.g. "--max_pending_infer=64").
set -euo pipefail
cd "$(dirname "$0")/.."

BIN_DIR=${BIN_DIR:-build}
MODELS=${MODELS:-recsys slow_mlp}
DURATION_S=${DURATION_S:-10}
CONCURRENCY=${CONCURRENCY:-16}
SLOW_CONCURRENCY=${SLOW_CONCURRENCY:-4}
FACTOR=${FACTOR:-3}
MAX_QUEUE=${MAX_QUEUE:-64}
TIMEOUT_US=${TIMEOUT_US:-100000}
SLOW_MAX_QUEUE=${SLOW_MAX_QUEUE:-16}
SLOW_TIMEOUT_US=${SLOW_TIMEOUT_US:-0}
PORT_BASE=${PORT_BASE:-18300}
RESULTS_DIR=${RESULTS_DIR:-$BIN_DIR/overload-bench}
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

rm -rf "$RESULTS_DIR"
mkdir -p "$RESULTS_DIR"
repo=$(mktemp -d /tmp/ndserve-overload-bench-XXXXXX)
daemon_pid=
stop_daemon() {
  if [[ -n $daemon_pid ]]; then
    kill "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  daemon_pid=
}
cleanup() {
  stop_daemon
  rm -rf "$repo"
}
trap cleanup EXIT

write_recsys() {
  local model=examples/models/recsys/1/model.onnx
  [[ -f $model ]] || { echo "missing $model: run /usr/bin/python3 tools/gen_models.py" >&2; exit 1; }
  mkdir -p "$repo/recsys/recsys/1"
  ln -s "$PWD/$model" "$repo/recsys/recsys/1/model.onnx"
  cat >"$repo/recsys/recsys/config.pbtxt" <<CONFIG
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
}

# bench_model NAME PORT_OFFSET CONCURRENCY [VAR=VALUE...]: a daemon serving only NAME (from
# $repo/NAME/NAME), with those environment variables, and the three runs.
bench_model() {
  local name=$1 offset=$2 concurrency=$3
  shift 3
  local grpc=127.0.0.1:$((PORT_BASE + offset + 1))
  local metrics=127.0.0.1:$((PORT_BASE + offset + 2))
  local admin=127.0.0.1:$((PORT_BASE + offset + 3))
  local out=$RESULTS_DIR/$name
  mkdir -p "$out"
  env "$@" "$BIN_DIR/server/ndserved" --model_repository="$repo/$name" --device=cpu \
    --grpc_address="$grpc" --metrics_address="$metrics" --admin_address="$admin" \
    --http_address= ${DAEMON_FLAGS:-} >"$out/daemon.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 1200); do
    grep -q "\] ready" "$out/daemon.log" 2>/dev/null && break
    sleep 0.1
  done
  run() {  # run RUN LOADTEST-FLAGS...
    local run=$1
    shift
    "$BIN_DIR/loadtest/ndserve-loadtest" --address="$grpc" --admin_address="$admin" \
      --model="$name" --daemon_pid="$daemon_pid" --duration_s="$DURATION_S" \
      --warmup_s=0 --json_out="$out/$run.json" "$@" >"$out/$run.txt" 2>&1 || true
  }
  scrape() { $PY -c "import urllib.request; print(urllib.request.urlopen('http://$metrics/metrics').read().decode())" >"$out/$1.metrics"; }
  run warmup --concurrency="$concurrency" --duration_s=2
  run capacity --concurrency="$concurrency"
  local capacity rate
  capacity=$($PY -c "import json; print(json.load(open('$out/capacity.json'))['throughput_rps'])")
  rate=$($PY -c "print(int($capacity * $FACTOR))")
  scrape before
  run overload --rate="$rate"
  scrape after
  run recovery --concurrency="$concurrency"
  stop_daemon
  $PY - "$out" "$name" "$rate" "$concurrency" <<'REPORT'
import json, re, sys
d, name, rate, concurrency = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

def rejected(which):
    counts = {}
    for line in open(f"{d}/{which}.metrics"):
        m = re.match(r'ndserve_inference_rejected_total\{(.*)\} (\S+)', line)
        if m and f'model="{name}"' in m.group(1):
            reason = re.search(r'reason="([^"]*)"', m.group(1)).group(1)
            counts[reason] = counts.get(reason, 0) + float(m.group(2))
    return counts

def served(which):
    """(sum of seconds, count) of the admitted requests' in-daemon duration."""
    out = [0.0, 0.0]
    for line in open(f"{d}/{which}.metrics"):
        m = re.match(r'ndserve_inference_request_duration_seconds_(sum|count)\{(.*)\} (\S+)', line)
        if m and f'model="{name}"' in m.group(2) and 'version=""' not in m.group(2):
            out[m.group(1) == "count"] += float(m.group(3))
    return out

before, after = rejected("before"), rejected("after")
(s0, c0), (s1, c1) = served("before"), served("after")
daemon_mean = f"{1000 * (s1 - s0) / (c1 - c0):.2f}" if c1 > c0 else "-"
counted = {k: int(after[k] - before.get(k, 0)) for k in after if after[k] - before.get(k, 0) > 0}
print(f"\n{name}:\n")
print("| run | offered | ok/s | ok p50 ms | ok p99 ms | ok max ms | ok mean ms (in daemon) | "
      "errors by code | error p99 ms | rejected (metrics) | not sent | RSS delta |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for run, offered in (("capacity", f"closed loop, {concurrency} clients"),
                     ("overload", f"{rate} req/s open loop"),
                     ("recovery", f"closed loop, {concurrency} clients")):
    r = json.load(open(f"{d}/{run}.json"))
    lat = r["latency_ms"]
    ok_rate = r["ok"] / r["elapsed_s"]
    errors = ", ".join(f"{k} {v}" for k, v in r.get("errors_by_code", {}).items()) or "none"
    err_p99 = f"{r['error_latency_ms']['p99']:.2f}" if r.get("errors") else "-"
    metric = ", ".join(f"{k} {v}" for k, v in sorted(counted.items())) if run == "overload" else ""
    rss = r.get("rss_delta_bytes", "-")
    if isinstance(rss, (int, float)):
        rss = f"{rss / 2**20:+.1f} MiB"
    mean = f"{lat['mean']:.2f}" + (f" ({daemon_mean})" if run == "overload" else "")
    print(f"| {run} | {offered} | {ok_rate:.0f} | {lat['p50']:.2f} | {lat['p99']:.2f} | "
          f"{lat['max']:.2f} | {mean} | {errors} | {err_p99} | {metric} | "
          f"{r.get('not_sent', 0)} | {rss} |")
REPORT
}

offset=0
for model in $MODELS; do
  case $model in
    recsys)
      write_recsys
      bench_model recsys "$offset" "$CONCURRENCY"
      ;;
    slow_mlp)
      $PY tools/gen_slow_mlp.py --out "$repo/slow_mlp" --max_queue_size "$SLOW_MAX_QUEUE" \
        --timeout_us "$SLOW_TIMEOUT_US"
      bench_model slow_mlp "$offset" "$SLOW_CONCURRENCY" OPENBLAS_NUM_THREADS=1
      ;;
    *)
      echo "unknown model '$model' (recsys, slow_mlp)" >&2
      exit 1
      ;;
  esac
  offset=$((offset + 10))
done
