#!/usr/bin/env bash
# docs/design.md §8, step 1 (here, on the CPU-only dev machine): build with CUDA and pack the
# test/benchmark/daemon binaries (stripped) plus the non-system shared libraries they
# load into .gpu/bundle.tar.xz (git-ignored), ready to be carried to a GPU machine that
# has the CUDA toolkit but none of Debian's libraries. Step 2 is scripts/gpu-run.sh,
# run there from the repository root with .gpu carried.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DNDSERVE_CUDA=ON
cmake --build "$BUILD_DIR"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
bins=()
for b in tests/gpu_memory_tests tests/gpu_engine_tests tests/memory_tests tests/kernels_tests tests/engine_tests \
         tests/train_tests benchmarks/train_benchmark \
         benchmarks/pool_benchmark benchmarks/engine_benchmark benchmarks/manager_benchmark \
         tests/torch/torch_model_tests tests/torch/torch_daemon_test \
         server/ndserved server/ndserve-cli loadtest/ndserve-loadtest loadtest/ndserve-echo; do
  [[ -x "$BUILD_DIR/$b" ]] && bins+=("$BUILD_DIR/$b")
done
for b in "${bins[@]}"; do strip -o "$stage/bin/$(basename "$b")" "$b"; done
# Everything ldd resolves except the C runtime, the driver and the CUDA toolkit's own
# libraries (cudart, cuBLAS): the GPU host has those in versions matching its driver,
# and cuBLAS alone would not fit in what a device call may carry.
skip='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libcuda|libnvidia|linux-vdso|libcudart|libcublas|libcublasLt)\.'
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  base=$(basename "$lib")
  [[ $base =~ $skip ]] || cp -L "$lib" "$stage/lib/"
done
# The recurrent training fixture (tools/gen_train_fixtures.py, a few KB) for train_tests'
# CUDA session against PyTorch; the tests find it through NDSERVE_TRAIN_FIXTURES.
train_fixtures="$BUILD_DIR/tests/train_fixtures"
if [[ -d $train_fixtures/recurrent_sgd ]]; then
  mkdir -p "$stage/train_fixtures" && cp -r "$train_fixtures/recurrent_sgd" "$stage/train_fixtures/"
fi
rm -rf .gpu && mkdir -p .gpu
tar -C "$stage" -cJf .gpu/bundle.tar.xz bin lib $([[ -d $stage/train_fixtures ]] && echo train_fixtures)
# The PyTorch fixtures (tools/gen_torch_models.py, made by the build) for the *_cuda cases
# of torch_model_tests and torch_daemon_test on cuda:0. All of them (~170 MB) would not
# fit in what a device call carries, so TORCH_MODELS picks which (space-separated names;
# none by default).
fixtures=$(sed -n 's/^NDSERVE_TORCH_FIXTURES:INTERNAL=//p' "$BUILD_DIR/CMakeCache.txt")
if [[ -n ${TORCH_MODELS:-} && -d $fixtures ]]; then
  mkdir -p .gpu/torch
  for m in $TORCH_MODELS; do cp -r "$fixtures/$m" .gpu/torch/; done
  touch .gpu/torch/DONE
fi
du -sh .gpu/bundle.tar.xz
echo "bundle ready: carry .gpu and run scripts/gpu-run.sh on the GPU machine"
