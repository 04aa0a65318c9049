# cifartrain's images. Targets:
#   runtime      cifar-train (Debian's CPU LibTorch) and the shared libraries it loads, nothing else
#   runtime-gpu  cifar-train built against the PyTorch wheel's CUDA LibTorch with NCCL, and the
#                CUDA, cuDNN and NCCL libraries of NVIDIA's wheels that it loads (about 3.5 GB).
#                Builds without a GPU; runs on a node whose container runtime mounts the driver.
#   operator     cifar-operator and its libraries
# All are distroless in shape: a root filesystem laid out by deploy/images/collect-rootfs.sh (the
# binary, ldd's closure, the CA bundle), run as UID 65532.
#
#   docker build --target runtime -t cifartrain/runtime .
#   docker build --target runtime-gpu -t cifartrain/runtime-gpu .
#   docker build --target operator -t cifartrain/operator .
# Without a registry (these machines), scripts/build-images.sh builds BASE from Debian packages.
# BINARIES=prebuilt takes rootfs/ from the build context instead of compiling (the tests' images,
# from the binaries the test build already made: scripts/build-images.sh --prebuilt).
ARG BASE=debian:bookworm
ARG BINARIES=compiled

# --- compile -------------------------------------------------------------------------------
# Everything but LibTorch: Debian's for the CPU images, the PyTorch wheel's for the GPU one.
FROM ${BASE} AS build-deps
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates \
      libgloo-dev libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev \
      prometheus-cpp-dev libcurl4-openssl-dev libarchive-dev libssl-dev zlib1g-dev \
      libcpprest-dev libyaml-cpp-dev libgrpc++-dev protobuf-compiler-grpc protobuf-compiler \
      libprotobuf-dev libpugixml-dev libunwind-dev libdw-dev \
    && rm -rf /var/lib/apt/lists/*

FROM build-deps AS compiled
ARG JOBS=2
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      libtorch-dev && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCIFAR_BUILD_TESTS=OFF \
      -DCIFAR_BUILD_BENCH=OFF \
    && cmake --build /build -j "${JOBS}" --target cifar-train cifar-operator \
    && /src/deploy/images/collect-rootfs.sh /rootfs/runtime /build/bin/cifar-train \
    && /src/deploy/images/collect-rootfs.sh /rootfs/operator /build/bin/cifar-operator

FROM build-deps AS gpu-compiled
ARG JOBS=2
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3-pip unzip && rm -rf /var/lib/apt/lists/*
# The wheels (about 3 GB) in a cache mount, so that a rebuild after a source change skips them;
# WHEELS names a directory that already holds them (scripts/build-images.sh mounts one there).
ARG WHEELS=/var/cache/cifartrain-wheels
COPY deploy/images/cuda-libtorch.sh /src/deploy/images/cuda-libtorch.sh
RUN --mount=type=cache,target=/var/cache/cifartrain-wheels \
    /src/deploy/images/cuda-libtorch.sh layout /opt/libtorch-cuda "${WHEELS}"
COPY . /src
# The libraries after --dlopen are loaded at run time (cuDNN's engines, torch's linear algebra
# and NVRTC); libcuda.so.1 is the node driver's, mounted in by the NVIDIA container runtime.
RUN cmake -C /opt/libtorch-cuda/libtorch-cuda.cmake -S /src -B /build -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DCIFAR_WITH_NCCL=ON -DCIFAR_BUILD_TESTS=OFF -DCIFAR_BUILD_BENCH=OFF \
    && cmake --build /build -j "${JOBS}" --target cifar-train \
    && cd /opt/libtorch-cuda && /src/deploy/images/collect-rootfs.sh /rootfs/runtime-gpu \
      --host-lib libcuda.so.1 /build/bin/cifar-train \
      --dlopen nvidia/cudnn/lib/libcudnn_*.so.9 torch/lib/libtorch_cuda_linalg.so \
      torch/lib/libcaffe2_nvrtc.so nvidia/cu13/lib/libnvrtc.so.13 \
      nvidia/cu13/lib/libnvrtc-builtins.so.13.0

# --- or take them from the build context ---------------------------------------------------------
FROM scratch AS prebuilt
# Named so that scripts/build-images.sh can remove it once the images are made: each build's copy
# of the context is a new half-GB image no tag names.
LABEL org.cifartrain.stage=prebuilt
COPY rootfs/ /rootfs/

FROM ${BINARIES} AS binaries

# --- the images ----------------------------------------------------------------------------
FROM scratch AS runtime
COPY --from=binaries /rootfs/runtime/ /
USER 65532:65532
WORKDIR /tmp
# gRPC (parameter server), c10d store, Prometheus metrics
EXPOSE 2222 29500 9464
ENTRYPOINT ["/usr/local/bin/cifar-train"]

FROM scratch AS runtime-gpu
COPY --from=gpu-compiled /rootfs/runtime-gpu/ /
# what the NVIDIA container runtime reads to mount the GPUs and the driver's compute libraries
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 65532:65532
WORKDIR /tmp
EXPOSE 2222 29500 9464
ENTRYPOINT ["/usr/local/bin/cifar-train"]

FROM scratch AS operator
COPY --from=binaries /rootfs/operator/ /
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/cifar-operator"]
