# syntax=docker/dockerfile:1
#
# ndserve image: ndserved, ndserve-cli and ndserve-loadtest on a CUDA runtime base.
#
#   docker build -t ndserve:0.1.0 .
#   docker run --gpus all -p 8000:8000 -p 8001:8001 -p 8002:8002 ndserve:0.1.0
#   docker run --gpus all -v $PWD/my-models:/models:ro -p 8001:8001 ndserve:0.1.0
#
# Two stages:
# - build: Debian 12, the distribution scripts/install-deps.sh installs from (Abseil
#   20220623, gRPC 1.51, protobuf 3.21, libonnx), plus the CUDA toolkit from NVIDIA's
#   Debian 12 repository, as on the development machines. The dependencies come from
#   running that very script, so the image, CI and the README never drift apart.
# - runtime: nvidia/cuda's runtime image (CUDA runtime and cuBLAS). NVIDIA publishes it
#   for Ubuntu, not Debian, so the binaries bring the Debian shared libraries they were
#   linked against in /opt/ndserve/lib: the same bundle scripts/gpu-bundle.sh carries to
#   the GPU machines (docs/design.md §8). glibc and libstdc++ are the base image's, which are
#   newer than Debian 12's and backward compatible.
ARG CUDA_VERSION=13.0.1
ARG CUDA_APT_VERSION=13-0

FROM debian:bookworm AS build
ARG CUDA_APT_VERSION
ENV DEBIAN_FRONTEND=noninteractive
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# nvcc, the CUDA runtime headers and cuBLAS only: the rest of the toolkit is not used.
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends ca-certificates curl \
 && curl -fsSL -o /tmp/cuda-keyring.deb \
      https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
 && dpkg -i /tmp/cuda-keyring.deb \
 && rm /tmp/cuda-keyring.deb \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      cuda-nvcc-${CUDA_APT_VERSION} cuda-cudart-dev-${CUDA_APT_VERSION} \
      libcublas-dev-${CUDA_APT_VERSION} \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/local/cuda/bin:${PATH}

WORKDIR /src
# Dependencies first, in their own layer, so source edits don't reinstall them.
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*

# Only the source tree: never a local build directory or .gpu bundle.
COPY CMakeLists.txt ./
COPY cmake cmake
COPY base base
COPY memory memory
COPY kernels kernels
COPY proto proto
COPY engine engine
COPY server server
COPY loadtest loadtest
COPY examples examples
COPY tools tools
COPY tests tests
# tests/ stays configured (the top-level CMakeLists adds it unconditionally) but only
# the shipped targets are built. Hopper plus PTX, as cmake/cuda.cmake defaults to.
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DNDSERVE_CUDA=ON \
      -DNDSERVE_BUILD_BENCHMARKS=OFF \
 && cmake --build build --target ndserved ndserve-cli ndserve-loadtest example_models

# The binaries and every shared library they load except those the runtime image
# provides (C runtime, libstdc++, CUDA runtime and cuBLAS) or the driver mounts.
RUN mkdir -p /out/bin /out/lib /out/models \
 && cp build/server/ndserved build/server/ndserve-cli build/loadtest/ndserve-loadtest /out/bin/ \
 && skip='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libnvidia|libcudart|libcublas|libcublasLt|linux-vdso)\.' \
 && for b in /out/bin/*; do ldd "$b" | awk '/=> \// {print $3}'; done | sort -u \
    | while read -r lib; do \
        [[ $(basename "$lib") =~ $skip ]] || cp -L "$lib" /out/lib/; \
      done \
 && cp -r examples/models/. /out/models/

FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04 AS runtime
LABEL org.opencontainers.image.title="ndserve" \
      org.opencontainers.image.description="ONNX model-serving daemon (KServe v2 gRPC) with scoped, capped device memory" \
      org.opencontainers.image.version="0.1.0"

RUN groupadd --system --gid 10001 ndserve \
 && useradd --system --uid 10001 --gid ndserve --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin ndserve

COPY --from=build /out/bin/ /opt/ndserve/bin/
COPY --from=build /out/lib/ /opt/ndserve/lib/
# The example repository; mount your own over /models.
COPY --from=build /out/models/ /models/

ENV PATH=/opt/ndserve/bin:${PATH} \
    LD_LIBRARY_PATH=/opt/ndserve/lib:/usr/local/nvidia/lib:/usr/local/nvidia/lib64 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
# Fails the build if the bundle missed a library the base image lacks.
RUN if ldd /opt/ndserve/bin/* | grep "not found"; then exit 1; fi

# 8000: KServe v2 HTTP/REST; 8001: KServe v2 gRPC and grpc.health.v1; 8002: Prometheus
# /metrics. The admin API (8003) stays on loopback unless --admin_token_file is given (see
# deploy/k8s).
EXPOSE 8000 8001 8002

# Numeric, so Kubernetes' runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001

# grpc.health.v1 liveness and readiness on the inference port; exits non-zero unless
# both are SERVING (readiness: every model loaded).
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD ["ndserve-cli", "health", "--server=127.0.0.1:8001", "--timeout_seconds=4"]

# SIGTERM drains in-flight requests for up to --exit_timeout_seconds; give `docker stop`
# longer than that (docker stop -t 40).
STOPSIGNAL SIGTERM
ENTRYPOINT ["ndserved"]
CMD ["--model_repository=/models", "--grpc_address=0.0.0.0:8001", "--http_address=0.0.0.0:8000", "--metrics_address=0.0.0.0:8002"]
