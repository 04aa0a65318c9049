#!/usr/bin/env bash
# Checks the runtime-gpu image on a machine without a GPU (scripts/build-images.sh runtime-gpu):
#  1. every shared library in the image resolves inside the image (the image's own loader, --list,
#     in a chroot of its root), the driver's libcuda.so.1 excepted: the node mounts it in;
#  2. cifar-train, in a container with no network (buildah's: podman run's rlimits are refused in
#     this sandbox), as the image's user, trains an epoch on the CPU with the CUDA LibTorch;
#  3. -c cuda, where there is no GPU, fails with the runtime's message, not a crash;
#  4. cifar-train was built with the NCCL backend: it calls c10d's ProcessGroupNCCL, and the
#     image holds NCCL.
# Running it on a GPU takes a node with the NVIDIA container runtime (not this machine).
#   scripts/check-gpu-image.sh [IMAGE]
set -euo pipefail
image=${1:-localhost/cifartrain/runtime-gpu:dev}
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "$image: $((size / 1000000)) MB"

root=$(podman image mount "$image")
trap 'podman image unmount "$image" >/dev/null' EXIT
checked=0
failed=0
while read -r file; do
  missing=$(chroot "$root" /lib64/ld-linux-x86-64.so.2 --list "$file" 2>&1 |
    awk '$3 == "not" {print $1}' | grep -vx libcuda.so.1 || true)
  checked=$((checked + 1))
  if [ -n "$missing" ]; then
    echo "unresolved in $file:" $missing >&2
    failed=$((failed + 1))
  fi
done < <(cd "$root" && { echo ./usr/local/bin/cifar-train; find . -type f -name '*.so*'; } | sed 's|^\.||')
echo "1. $checked files (cifar-train and its libraries): $failed with unresolved libraries"
((failed == 0))
nccl_calls=$(nm -DC --undefined-only "$root/usr/local/bin/cifar-train" | grep -c 'c10d::ProcessGroupNCCL' || true)
nccl_library=$(cd "$root" && find . -name 'libnccl.so*' | sed 's|^\.||')

container=$(buildah from "$image")
trap 'podman image unmount "$image" >/dev/null; buildah rm "$container" >/dev/null' EXIT
run() {
  buildah run --network none --user 65532:65532 "$container" -- /usr/local/bin/cifar-train \
    -d synthetic -m simplecnn -b 64 -e 1 --synthetic-train-size 640 --metrics-port -1 \
    --model-dir /tmp/model "$@" 2>&1
}
cpu=$(run -c cpu) || { echo "$cpu" >&2; echo "2. training on the CPU failed" >&2; exit 1; }
grep -q 'done: 1 epochs' <<<"$cpu" || { echo "$cpu" >&2; exit 1; }
echo "2. trains on the CPU: $(grep 'done: 1 epochs' <<<"$cpu" | sed 's/.*\] //')"
if cuda=$(run -c cuda); then
  echo "$cuda" >&2
  echo "3. -c cuda succeeded on a machine with no GPU?" >&2
  exit 1
fi
grep -q 'no CUDA device' <<<"$cuda" || { echo "$cuda" >&2; exit 1; }
echo "3. without a GPU: $(grep 'no CUDA device' <<<"$cuda" | sed 's/.*\] //')"
if ((nccl_calls == 0)) || [ -z "$nccl_library" ]; then
  echo "4. no NCCL: $nccl_calls calls into ProcessGroupNCCL, library '$nccl_library'" >&2
  exit 1
fi
echo "4. NCCL: cifar-train calls ProcessGroupNCCL ($nccl_calls symbols); $nccl_library"
