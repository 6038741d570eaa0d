#!/usr/bin/env bash
# Builds ndserved and starts it in the foreground serving examples/models. The README's
# "build and run" command. Extra arguments go to ndserved, e.g.
#   scripts/run.sh --memory_pool=split --memory_limit=2GiB
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" --target ndserved ndserve-cli
exec "$BUILD_DIR/server/ndserved" --model_repository=examples/models "$@"
