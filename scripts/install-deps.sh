#!/usr/bin/env bash
# Installs every build, test and benchmark dependency from Debian's archive.
# The README's commands, .ci/run and the Dockerfile all call this one script so the
# three never drift apart. Safe to run again: apt-get skips what is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libabsl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libopenblas-dev
  libcpp-httplib-dev rapidjson-dev python3-requests libssl-dev openssl python3-h2
  python3-onnx python3-numpy python3-grpcio python3-protobuf python3-torch python3-torchvision
  prometheus yamllint
  clang libclang-rt-14-dev
  curl ccache
  libcivetweb-dev chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
