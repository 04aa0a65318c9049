#!/usr/bin/env bash
# Builds cifartrain's images with podman (no Docker engine or registry here) and writes each as a
# docker-archive tar that `ctr -n k8s.io images import` or `kind load image-archive` loads.
#   scripts/build-images.sh [--prebuilt BUILD_DIR] [--out DIR] [TARGET...]
# TARGETs: runtime, operator (default: both), runtime-gpu (compiled against the PyTorch wheel's
# CUDA LibTorch: about 3 GB of wheels, 10 minutes; checked by scripts/check-gpu-image.sh).
#  --prebuilt BUILD_DIR  take BUILD_DIR/bin's binaries (this machine's build) instead of compiling
#                        in the image: what the tests do, seconds instead of a full compile
#                        (runtime and operator only: the test build is a CPU build).
#  --out DIR             where the tars go (default ~/.cache/cifartrain/images)
# Without --prebuilt, the compile stage needs a Debian 12 base: made here with mmdebstrap (cached
# in the output directory) and imported into podman as localhost/debian:bookworm, since no
# registry can be reached. With a registry, `docker build --target runtime .` is all it takes.
# Images are tagged localhost/cifartrain/<target>:dev (a non-latest tag: kubelets do not pull).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${CIFAR_IMAGE_CACHE:-$HOME/.cache/cifartrain/images}
prebuilt=""
targets=()
while (($#)); do
  case $1 in
    --prebuilt) prebuilt=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "build-images.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=(runtime operator)
for target in "${targets[@]}"; do
  case $target in
    runtime|operator) ;;
    runtime-gpu) [ -z "$prebuilt" ] || { echo "build-images.sh: runtime-gpu is compiled in the image; drop --prebuilt" >&2; exit 2; } ;;
    *) echo "build-images.sh: unknown target $target (runtime, runtime-gpu, operator)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
for tool in podman; do
  command -v "$tool" >/dev/null || { echo "build-images.sh: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done

args=()
context=$here
if [ -n "$prebuilt" ]; then
  # A context of two root filesystems, laid out from the test build's binaries on this machine.
  context=$(mktemp -d)
  trap 'rm -rf "$context"' EXIT
  "$here/deploy/images/collect-rootfs.sh" "$context/rootfs/runtime" "$prebuilt/bin/cifar-train"
  "$here/deploy/images/collect-rootfs.sh" "$context/rootfs/operator" "$prebuilt/bin/cifar-operator"
  args+=(--build-arg BINARIES=prebuilt)
else
  base_tar="$out/debian-bookworm-minbase.tar"
  if ! podman image exists localhost/debian:bookworm; then
    if [ ! -f "$base_tar" ]; then
      command -v mmdebstrap >/dev/null || { echo "build-images.sh: mmdebstrap is missing" >&2; exit 1; }
      mmdebstrap --variant=minbase --format=tar bookworm "$base_tar.partial"
      mv "$base_tar.partial" "$base_tar"
    fi
    podman import "$base_tar" localhost/debian:bookworm
  fi
  # BINARIES named although it is the default: buildah resolves a stage named by an ARG only
  # from --build-arg, not from the ARG's default
  # The compile stage's apt reaches Debian's mirror over the host's network: podman's own bridge
  # network would leave a bridge, iptables chains and ip_forward on behind it.
  args+=(--build-arg BASE=localhost/debian:bookworm --build-arg BINARIES=compiled --network host)
fi

for target in "${targets[@]}"; do
  tag="localhost/cifartrain/$target:dev"
  start=$(date +%s)
  target_args=()
  if [ "$target" = runtime-gpu ]; then
    # The PyTorch and NVIDIA wheels, fetched here once (where pip is set up for this network) and
    # mounted into the build instead of downloaded there on every build.
    wheels=${CIFAR_GPU_WHEELS:-$HOME/.cache/cifartrain/gpu-wheels}
    "$here/deploy/images/cuda-libtorch.sh" download "$wheels"
    target_args+=(-v "$wheels:/wheels:ro" --build-arg WHEELS=/wheels)
  fi
  previous=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
  podman build --quiet -f "$here/Dockerfile" "${args[@]}" "${target_args[@]}" --target "$target" \
    -t "$tag" "$context" >/dev/null
  # The image the tag named before, untagged by this build, would stay behind in podman's store
  # (half a GB a runtime build): removed unless something still uses it.
  if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$tag")" ]; then
    podman rmi "$previous" >/dev/null 2>&1 || true
  fi
  rm -f "$out/$target.tar"
  podman save --quiet --format docker-archive -o "$out/$target.tar" "$tag"
  size=$(podman image inspect --format '{{.Size}}' "$tag")
  echo "$tag: $((size / 1000000)) MB, $out/$target.tar ($(($(date +%s) - start)) s)" >&2
done
# The prebuilt binaries' stage (the Dockerfile labels it), which no image needs once built.
podman image prune --force --filter label=org.cifartrain.stage=prebuilt >/dev/null 2>&1 || true
echo "$out"
