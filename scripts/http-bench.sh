#!/usr/bin/env bash
# gRPC vs KServe v2 HTTP/REST (binary tensor extension and JSON) on one daemon in one run:
# mlp batch 1, closed loop at each concurrency, ndserve-loadtest for every row, so the
# rows differ only in the protocol (docs/design.md, "HTTP/REST request path").
#
#   scripts/http-bench.sh            # prints a markdown table
#
# Environment: BIN_DIR=build, DURATION_S=10, CONCURRENCY="8 64", PORT_BASE=18400.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN_DIR=${BIN_DIR:-build}
DURATION_S=${DURATION_S:-10}
CONCURRENCY=${CONCURRENCY:-"8 64"}
PORT_BASE=${PORT_BASE:-18400}
http=127.0.0.1:$PORT_BASE
grpc=127.0.0.1:$((PORT_BASE + 1))

"$BIN_DIR/server/ndserved" --model_repository=examples/models --device=cpu \
  --grpc_address="$grpc" --http_address="$http" \
  --metrics_address=127.0.0.1:$((PORT_BASE + 2)) --admin_address=127.0.0.1:$((PORT_BASE + 3)) \
  >/dev/null 2>&1 &
daemon_pid=$!
trap 'kill $daemon_pid 2>/dev/null; wait $daemon_pid 2>/dev/null' EXIT
for _ in $(seq 300); do curl -sf "http://$http/v2/health/ready" >/dev/null && break; sleep 0.2; done

echo "| concurrency | protocol | req/s | vs gRPC | p50 ms | p99 ms |"
echo "|---|---|---|---|---|---|"
for c in $CONCURRENCY; do
  base=
  for p in grpc http-binary http-json; do
    case $p in
      grpc) args=(--address="$grpc") ;;
      http-binary) args=(--protocol=http --http_format=binary --address="$http") ;;
      http-json) args=(--protocol=http --http_format=json --address="$http") ;;
    esac
    out=$("$BIN_DIR/loadtest/ndserve-loadtest" "${args[@]}" --model=mlp --batch=1 \
      --concurrency="$c" --duration_s="$DURATION_S" --warmup_s=1 --admin_address= \
      --metrics_address=)
    rps=$(sed -n 's/^throughput: \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
    p50=$(sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' <<<"$out")
    p99=$(sed -n 's/.* p99 \([0-9.]*\) ms.*/\1/p' <<<"$out")
    [[ -z $base ]] && base=$rps
    echo "| $c | $p | $rps | $(awk -v a="$rps" -v b="$base" 'BEGIN{printf "%.2f", a/b}') | $p50 | $p99 |"
  done
done
