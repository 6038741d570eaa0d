#!/usr/bin/env bash
# Measures ndserved's ModelInfer path against the bare gRPC echo server (ndserve-echo,
# the ceiling: same gRPC, no model, no pool) with ndserve-loadtest, on this machine, and
# writes a markdown table: throughput and p99 of `mlp` batch 1 and `recsys` batch 16 at
# concurrency 1, 8 and 64, the ratio to the echo server, the allocated-bytes delta
# of every daemon run (the leak check), and each server's CPU time per request.
#
#   scripts/loadtest-bench.sh [OUT.md]          # default OUT.md: $RESULTS_DIR/bench.md
#
# Targets (exit 1 when one is missed): on mlp batch 1 at concurrency 64, at least 0.7x
# the echo server's throughput and p99 under 5 ms; zero allocated-bytes growth in every
# daemon run (and, with SOAK=1, a flat allocated curve and < 1% RSS growth over 1M
# requests).
#
# Environment:
#   BUILD_DIR=build       where to build (cmake + ninja, only the three targets needed)
#   BIN_DIR=              use prebuilt ndserved/ndserve-echo/ndserve-loadtest from here
#                         instead of building; a sibling lib/ goes on LD_LIBRARY_PATH.
#                         scripts/gpu-run.sh runs it so on the GPU machine, with the
#                         binaries of the scripts/gpu-bundle.sh bundle and DEVICE=cuda:0.
#   MODEL_REPOSITORY=examples/models   DEVICE=auto (ndserved --device)
#   DURATION_S=10 WARMUP_S=2           per run
#   CLIENT_THREADS=0                   ndserve-loadtest --threads (0: min(4, CPUs))
#   SERVER_THREADS=0                   ndserve-echo --threads (0: one per CPU)
#   PORT_BASE=18100                    echo on +1; ndserved grpc/metrics/admin on +11/+12/+13
#   SOAK=0                             1: also the 1,000,000-request soak on mlp
#   RESULTS_DIR=$BUILD_DIR/loadtest-bench   JSON of every run, logs, the table
#   REPORT_ONLY=0                      1: exit 0 even when a target is missed
#   SKIP_ECHO=0                        1: the daemon only (a second daemon run beside an
#                                      echo run already made in RESULTS_DIR)
#   SERVER_CPUS= CLIENT_CPUS=          taskset -c lists: the server (echo or ndserved) and
#                                      the load generator on disjoint cores, so that the
#                                      client's own threads do not set the servers' tails
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
RESULTS_DIR=${RESULTS_DIR:-$BUILD_DIR/loadtest-bench}
MODEL_REPOSITORY=${MODEL_REPOSITORY:-examples/models}
DEVICE=${DEVICE:-auto}
DURATION_S=${DURATION_S:-10}
WARMUP_S=${WARMUP_S:-2}
CLIENT_THREADS=${CLIENT_THREADS:-0}
SERVER_THREADS=${SERVER_THREADS:-0}
PORT_BASE=${PORT_BASE:-18100}
SOAK=${SOAK:-0}
REPORT_ONLY=${REPORT_ONLY:-0}
PY=/usr/bin/python3
server_pin=() client_pin=()
[[ -n ${SERVER_CPUS:-} ]] && server_pin=(taskset -c "$SERVER_CPUS")
[[ -n ${CLIENT_CPUS:-} ]] && client_pin=(taskset -c "$CLIENT_CPUS")
[[ -x $PY ]] || PY=python3

mkdir -p "$RESULTS_DIR"
OUT_MD=${1:-$RESULTS_DIR/bench.md}

if [[ -n ${BIN_DIR:-} ]]; then
  if [[ -d $BIN_DIR/../lib ]]; then
    lib_dir=$(cd "$BIN_DIR/../lib" && pwd)
    export LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  DAEMON=$BIN_DIR/ndserved
  ECHO=$BIN_DIR/ndserve-echo
  LOADTEST=$BIN_DIR/ndserve-loadtest
else
  if [[ ! -f $BUILD_DIR/build.ninja ]]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNDSERVE_BUILD_BENCHMARKS=OFF
  fi
  targets=(ndserved ndserve-echo ndserve-loadtest)
  # The recsys model is generated, not checked in.
  [[ -f $MODEL_REPOSITORY/recsys/1/model.onnx ]] || targets+=(example_models)
  ninja -C "$BUILD_DIR" "${targets[@]}"
  DAEMON=$BUILD_DIR/server/ndserved
  ECHO=$BUILD_DIR/loadtest/ndserve-echo
  LOADTEST=$BUILD_DIR/loadtest/ndserve-loadtest
fi
for b in "$DAEMON" "$ECHO" "$LOADTEST"; do
  [[ -x $b ]] || { echo "loadtest-bench: $b not found" >&2; exit 2; }
done

ECHO_ADDR=127.0.0.1:$((PORT_BASE + 1))
GRPC_ADDR=127.0.0.1:$((PORT_BASE + 11))
METRICS_ADDR=127.0.0.1:$((PORT_BASE + 12))
ADMIN_ADDR=127.0.0.1:$((PORT_BASE + 13))

# Only the processes this script started are stopped, by pid.
source scripts/daemon-proc.sh
trap stop_server EXIT

# Both servers get the same inputs, given explicitly: the echo server has no
# ModelMetadata, and identical request bytes keep the comparison fair. They match
# examples/models/*/config.pbtxt.
declare -A INPUTS=(
  [mlp]="input:FP32:-1x64"
  [recsys]="sparse_ids:INT64:-1x4x8,dense:FP32:-1x13"
)
CASES=("mlp 1" "recsys 16")
CONCURRENCY=(1 8 64)

# run_case <label> <address> <model> <batch> <concurrency> [extra loadtest flags...]
run_case() {
  local label=$1 address=$2 model=$3 batch=$4 conc=$5
  shift 5
  local base="$RESULTS_DIR/${label}-${model}-b${batch}-c${conc}"
  echo "== $label $model batch $batch concurrency $conc"
  # The server's CPU time (user + system, /proc/<pid>/stat) over the case's wall time,
  # for its CPU cost per request: at high concurrency a GPU daemon is bound by its host
  # cores, so this is what sets it apart from the echo server there.
  local cpu0 t0
  cpu0=$(server_cpu_ticks)
  t0=$(date +%s.%N)
  # A failed check (errors, leak) is reported in the table, not fatal here.
  "${client_pin[@]}" "$LOADTEST" --address="$address" --model="$model" --batch="$batch" \
    --input="${INPUTS[$model]}" --concurrency="$conc" --duration_s="$DURATION_S" \
    --warmup_s="$WARMUP_S" --threads="$CLIENT_THREADS" --wait_ready_s=60 \
    --json_out="$base.json" "$@" >"$base.txt" 2>&1 || true
  echo "$(($(server_cpu_ticks) - cpu0)) $(getconf CLK_TCK) $(date +%s.%N) $t0" >"$base.cpu"
  tail -n +4 "$base.txt" | sed 's/^/   /'
}

server_cpu_ticks() {  # utime + stime of $server_pid, in clock ticks
  awk '{print $14 + $15}' "/proc/$server_pid/stat" 2>/dev/null || echo 0
}

if [[ ${SKIP_ECHO:-0} != 1 ]]; then
echo "loadtest-bench: echo server at $ECHO_ADDR"
"${server_pin[@]}" "$ECHO" --address="$ECHO_ADDR" --threads="$SERVER_THREADS" >"$RESULTS_DIR/echo.log" 2>&1 &
server_pid=$!
for c in "${CASES[@]}"; do
  read -r model batch <<<"$c"
  for conc in "${CONCURRENCY[@]}"; do
    run_case echo "$ECHO_ADDR" "$model" "$batch" "$conc" --admin_address= --metrics_address=
  done
done
stop_server
fi

echo "loadtest-bench: ndserved at $GRPC_ADDR (device $DEVICE)"
"${server_pin[@]}" "$DAEMON" --model_repository="$MODEL_REPOSITORY" --device="$DEVICE" \
  --grpc_address="$GRPC_ADDR" --metrics_address="$METRICS_ADDR" \
  --admin_address="$ADMIN_ADDR" --http_address= >"$RESULTS_DIR/ndserved.log" 2>&1 &
server_pid=$!
daemon_flags=(--admin_address="$ADMIN_ADDR" --metrics_address="$METRICS_ADDR"
              --daemon_pid="$server_pid")
# ndserve_memory_device_alloc_total after each case (device_allocs.txt): once a case's
# shapes have been seen the series must stay put (no cudaMalloc on the request path).
# server_times.txt: the daemon's own mean request, queue and compute time per request in
# each case (the _sum/_count deltas of its duration histograms), to set beside the
# client's latency: what is left over is gRPC, the wire and the client.
scrape_device_allocs() {
  "$PY" -c 'import sys, urllib.request, json, os
t = urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=5).read().decode()
print(sys.argv[2] + ": " + " ".join(l for l in t.splitlines()
                                    if l.startswith("ndserve_memory_device_alloc_total")))
sums = {}
for l in t.splitlines():
    for part in ("request", "queue", "compute"):
        for kind in ("sum", "count"):
            if l.startswith("ndserve_inference_%s_duration_seconds_%s" % (part, kind)):
                key = (part, kind)
                sums[key] = sums.get(key, 0.0) + float(l.rsplit(" ", 1)[1])
state = sys.argv[3]
prev = json.load(open(state)) if os.path.exists(state) else {}
cur = {"%s_%s" % k: v for k, v in sums.items()}
json.dump(cur, open(state, "w"))
d = {k: cur[k] - prev.get(k, 0.0) for k in cur}
with open(sys.argv[4], "a") as f:
    f.write(sys.argv[2] + ": " + ", ".join(
        "%s %.1f us" % (p, 1e6 * d["%s_sum" % p] / d["%s_count" % p])
        for p in ("request", "queue", "compute") if d.get("%s_count" % p, 0) > 0)
        + " per request (%d requests)\n" % d.get("request_count", 0))' \
    "$METRICS_ADDR" "$1" "$RESULTS_DIR/.server_times.json" "$RESULTS_DIR/server_times.txt" \
    >>"$RESULTS_DIR/device_allocs.txt" 2>&1 || true
}
rm -f "$RESULTS_DIR/.server_times.json" "$RESULTS_DIR/server_times.txt"
for c in "${CASES[@]}"; do
  read -r model batch <<<"$c"
  for conc in "${CONCURRENCY[@]}"; do
    run_case ndserve "$GRPC_ADDR" "$model" "$batch" "$conc" "${daemon_flags[@]}"
    scrape_device_allocs "after $model b$batch c$conc"
  done
done
if [[ $SOAK == 1 ]]; then
  echo "== soak: mlp batch 1, concurrency 64, 1,000,000 requests"
  "${client_pin[@]}" "$LOADTEST" --address="$GRPC_ADDR" --model=mlp --batch=1 --input="${INPUTS[mlp]}" \
    --concurrency=64 --soak --warmup_s="$WARMUP_S" --threads="$CLIENT_THREADS" \
    --wait_ready_s=60 "${daemon_flags[@]}" --json_out="$RESULTS_DIR/soak.json" \
    --samples_out="$RESULTS_DIR/soak-samples.csv" >"$RESULTS_DIR/soak.txt" 2>&1 || true
  tail -n 8 "$RESULTS_DIR/soak.txt" | sed 's/^/   /'
fi
stop_server

set +e
"$PY" - "$RESULTS_DIR" "$OUT_MD" "$SOAK" <<'EOF'
import json, os, platform, sys

results, out_md, soak = sys.argv[1], sys.argv[2], sys.argv[3] == "1"

def load(name):
    path = os.path.join(results, name)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def cell(v, fmt):
    return "n/a" if v is None else fmt.format(v)

def p99(r):
    # No successful request, no latency to speak of.
    return r["latency_ms"]["p99"] if r and r["ok"] > 0 else None

lines = []
cpu = ""
try:
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
except OSError:
    pass
pins = ", ".join(f"{who} on CPUs {os.environ[k]}" for who, k in
                 (("servers", "SERVER_CPUS"), ("load generator", "CLIENT_CPUS"))
                 if os.environ.get(k))
lines.append(f"ndserve load test, {os.cpu_count()} CPUs ({cpu}), {platform.node()}"
             + (f"; {pins}" if pins else ""))
lines.append("")
lines.append("| model | batch | concurrency | echo req/s | echo p99 ms | ndserve req/s "
             "| ndserve p99 ms | ratio | ndserve errors | allocated delta "
             "| echo CPU us/req | ndserve CPU us/req |")
lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

def cpu_per_request(name, r):
    # The server's busy cores over the case (warm-up included) per request per second.
    try:
        with open(os.path.join(results, name)) as f:
            ticks, hz, end, start = (float(x) for x in f.read().split())
    except (OSError, ValueError):
        return None
    if not r or r["throughput_rps"] <= 0 or end <= start:
        return None
    return ticks / hz / (end - start) * 1e6 / r["throughput_rps"]

failures = []
leaks = []
for model, batch in (("mlp", 1), ("recsys", 16)):
    for conc in (1, 8, 64):
        e = load(f"echo-{model}-b{batch}-c{conc}.json")
        d = load(f"ndserve-{model}-b{batch}-c{conc}.json")
        erps = e["throughput_rps"] if e else None
        drps = d["throughput_rps"] if d else None
        ratio = drps / erps if erps and drps is not None else None
        errors = None
        if d:
            errors = ", ".join(f"{k}={v}" for k, v in d["errors_by_code"].items()) or "0"
        delta = d.get("allocated_delta_bytes") if d else None
        if d is None:
            why = ""
            try:
                with open(os.path.join(results, f"ndserve-{model}-b{batch}-c{conc}.txt")) as f:
                    why = f.readline().strip()
            except OSError:
                pass
            failures.append(f"no result for ndserve {model} batch {batch} concurrency {conc}"
                            + (f": {why}" if why else ""))
        elif delta is None:
            leaks.append(f"{model} b{batch} c{conc}: allocated bytes not read")
        elif delta != 0:
            leaks.append(f"{model} b{batch} c{conc}: allocated {delta:+d} B")
        lines.append(
            f"| {model} | {batch} | {conc} | {cell(erps, '{:.0f}')} "
            f"| {cell(p99(e), '{:.3f}')} "
            f"| {cell(drps, '{:.0f}')} "
            f"| {cell(p99(d), '{:.3f}')} "
            f"| {cell(ratio, '{:.2f}x')} | {cell(errors, '{}')} "
            f"| {cell(delta, '{:+d} B')} "
            f"| {cell(cpu_per_request(f'echo-{model}-b{batch}-c{conc}.cpu', e), '{:.1f}')} "
            f"| {cell(cpu_per_request(f'ndserve-{model}-b{batch}-c{conc}.cpu', d), '{:.1f}')} |")
        if (model, batch, conc) == ("mlp", 1, 64):
            target = (ratio, p99(d), d["errors"] if d else None)

lines.append("")
ratio, p99_ms, errs = target
lines.append("Targets (mlp, batch 1, concurrency 64):")
ok_ratio = ratio is not None and ratio >= 0.7
ok_p99 = p99_ms is not None and p99_ms < 5.0 and errs == 0
lines.append(f"- throughput >= 0.7x echo: {'PASS' if ok_ratio else 'FAIL'} "
             f"({cell(ratio, '{:.2f}x')})")
lines.append(f"- p99 < 5 ms (no errors): {'PASS' if ok_p99 else 'FAIL'} "
             f"({cell(p99_ms, '{:.3f} ms')}, errors {cell(errs, '{}')})")
lines.append(f"- zero allocated-bytes growth in every daemon run: "
             f"{'PASS' if not leaks else 'FAIL (' + '; '.join(leaks) + ')'}")
passed = ok_ratio and ok_p99 and not leaks and not failures
if soak:
    s = load("soak.json")
    if s is None:
        lines.append("- soak: FAIL (no result)")
        passed = False
    else:
        lines.append(f"- soak, {s['sent']} requests, {len(s['samples'])} samples, "
                     f"{s['throughput_rps']:.0f} req/s, p99 {s['latency_ms']['p99']:.3f} ms:")
        for c in s["checks"]:
            lines.append(f"  - {c['name']}: {'PASS' if c['passed'] else 'FAIL'} ({c['detail']})")
        passed = passed and s["passed"]
for f in failures:
    lines.append(f"- {f}")
text = "\n".join(lines) + "\n"
with open(out_md, "w") as f:
    f.write(text)
print(text, end="")
sys.exit(0 if passed else 1)
EOF
rc=$?
set -e
echo "loadtest-bench: table in $OUT_MD, runs in $RESULTS_DIR"
if [[ $REPORT_ONLY == 1 ]]; then exit 0; fi
exit $rc
