#!/usr/bin/env bash
# Builds ndserve and runs every test through CTest. The README's test command.
#   scripts/test.sh            # Release-with-debug-info build in build/
#   BUILD_DIR=build-x scripts/test.sh -R Pool   # extra args go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 600 "$@"
