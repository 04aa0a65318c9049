# cifartrain's images. Targets:
#   runtime      cifar-train (Debian's CPU LibTorch) and the shared libraries it loads, nothing else
#   operator     cifar-operator and its libraries
# (A CUDA flavour of the runtime is built on GPU machines by scripts/gpu/; no image of it yet.)
# Both CPU images are distroless in shape: a root filesystem laid out by
# deploy/images/collect-rootfs.sh (the binary, ldd's closure, the CA bundle), run as UID 65532.
#
#   docker build --target runtime -t cifartrain/runtime .
#   docker build --target operator -t cifartrain/operator .
# Without a registry (these machines), scripts/build-images.sh builds BASE from Debian packages.
# BINARIES=prebuilt takes rootfs/ from the build context instead of compiling (the tests' images,
# from the binaries the test build already made: scripts/build-images.sh --prebuilt).
ARG BASE=debian:bookworm
ARG BINARIES=compiled

# --- compile -------------------------------------------------------------------------------
FROM ${BASE} AS compiled
ARG JOBS=2
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates \
      libtorch-dev libgloo-dev libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev \
      prometheus-cpp-dev libcurl4-openssl-dev libarchive-dev libssl-dev zlib1g-dev \
      libcpprest-dev libyaml-cpp-dev libgrpc++-dev protobuf-compiler-grpc protobuf-compiler \
      libprotobuf-dev \
    && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCIFAR_BUILD_TESTS=OFF \
      -DCIFAR_BUILD_BENCH=OFF \
    && cmake --build /build -j "${JOBS}" --target cifar-train cifar-operator \
    && /src/deploy/images/collect-rootfs.sh /rootfs/runtime /build/bin/cifar-train \
    && /src/deploy/images/collect-rootfs.sh /rootfs/operator /build/bin/cifar-operator

# --- or take them from the build context ---------------------------------------------------------
FROM scratch AS prebuilt
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

FROM scratch AS operator
COPY --from=binaries /rootfs/operator/ /
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/cifar-operator"]
