#!/usr/bin/env bash
# DESIGN.md §6, step 1 (here, on the CPU-only dev machine): build with CUDA and gather
# the test/benchmark/daemon binaries plus the non-system shared libraries they load
# into .gpu/ (git-ignored), ready to be carried to a GPU machine that has the CUDA
# toolkit but none of Debian's libraries. Step 2 is scripts/gpu-run.sh, run there:
#   device run --carry .gpu -- bash scripts/gpu-run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build-gpu}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNDSERVE_CUDA=ON
cmake --build "$BUILD_DIR"

rm -rf .gpu && mkdir -p .gpu/bin .gpu/lib .gpu/models
bins=()
for b in tests/gpu_memory_tests tests/memory_tests tests/kernels_tests tests/engine_tests \
         benchmarks/pool_benchmark benchmarks/engine_benchmark benchmarks/manager_benchmark \
         server/ndserved loadtest/ndserve-loadtest loadtest/ndserve-echo; do
  [[ -x "$BUILD_DIR/$b" ]] && bins+=("$BUILD_DIR/$b")
done
cp "${bins[@]}" .gpu/bin/
# Everything ldd resolves except the C runtime and the driver, which the GPU host has
# in versions matching its kernel and driver.
skip='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libcuda|libnvidia|linux-vdso)\.'
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  base=$(basename "$lib")
  [[ $base =~ $skip ]] || cp -L "$lib" .gpu/lib/
done
cp -r examples/models/. .gpu/models/
[[ -d tests/fixtures ]] && cp -r tests/fixtures .gpu/fixtures
du -sh .gpu
echo "bundle ready: carry .gpu and run scripts/gpu-run.sh on the GPU machine"
