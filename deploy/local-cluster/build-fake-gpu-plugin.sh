#!/usr/bin/env bash
# Builds fake-gpu-plugin (fake-gpu-plugin/: the local cluster's fake GPUs) against the kubelet's
# device plugin API of the pinned Kubernetes (k8s.io/kubelet's deviceplugin/v1beta1/api.proto,
# from Go's module cache), cached outside the repo under a key of its sources and that version
# ($CIFAR_TOOLS_CACHE, default ~/.cache/cifartrain/tools): a warm run does nothing. ~1 minute cold.
# Prints the directory holding the binary. With --image TAR, also writes its image
# (localhost/cifartrain/fake-gpu-plugin:dev: the binary and its libraries, nothing else; what
# fake-gpu-plugin/daemonset.yaml runs) to TAR as a docker-archive, made with podman once per key.
#   deploy/local-cluster/build-fake-gpu-plugin.sh [--image TAR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image_tar=""
case ${1:-} in
  "") ;;
  --image) image_tar=${2:?build-fake-gpu-plugin.sh --image TAR} ;;
  *) echo "usage: build-fake-gpu-plugin.sh [--image TAR]" >&2; exit 2 ;;
esac
kubelet_version=$(awk '$1 == "k8s.io/kubelet" && $2 == "=>" {print $4}' "$here/modules/kubernetes/go.mod")
[ -n "$kubelet_version" ] || { echo "build-fake-gpu-plugin.sh: no k8s.io/kubelet in modules/kubernetes/go.mod" >&2; exit 1; }
key=$( (echo "$kubelet_version"; cd "$here/fake-gpu-plugin" && find . -type f | LC_ALL=C sort | xargs cat) |
  sha256sum | cut -c1-12)
out=${CIFAR_TOOLS_CACHE:-$HOME/.cache/cifartrain/tools}/fake-gpu-plugin-$key
if ! [ -x "$out/bin/fake-gpu-plugin" ]; then
  module=$(cd "$here/modules/kubernetes" && GOTOOLCHAIN=local GOFLAGS=-mod=mod \
    go mod download -json "k8s.io/kubelet@$kubelet_version" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$here/fake-gpu-plugin" -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKUBELET_DEVICEPLUGIN_PROTO="$module/pkg/apis/deviceplugin/v1beta1/api.proto" \
    -DCMAKE_RUNTIME_OUTPUT_DIRECTORY="$out/bin" "${launcher[@]}" >&2
  cmake --build "$out/build" -j 2 >&2
fi
if [ -n "$image_tar" ]; then
  if ! [ -f "$out/image.tar" ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    "$here/../images/collect-rootfs.sh" "$work/rootfs" "$out/bin/fake-gpu-plugin"
    printf 'FROM scratch\nCOPY rootfs/ /\nENTRYPOINT ["/usr/local/bin/fake-gpu-plugin"]\n' >"$work/Containerfile"
    podman build --quiet -t localhost/cifartrain/fake-gpu-plugin:dev "$work" >/dev/null
    podman save --quiet --format docker-archive -o "$out/image.tar.partial" localhost/cifartrain/fake-gpu-plugin:dev
    mv "$out/image.tar.partial" "$out/image.tar"
  fi
  mkdir -p "$(dirname "$image_tar")"
  cmp -s "$out/image.tar" "$image_tar" || cp "$out/image.tar" "$image_tar"
fi
echo "$out/bin"
