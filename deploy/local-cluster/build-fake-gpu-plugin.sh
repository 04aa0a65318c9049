#!/usr/bin/env bash
# Builds fake-gpu-plugin (fake-gpu-plugin/: the local cluster's fake GPUs) against the kubelet's
# device plugin API of the pinned Kubernetes (k8s.io/kubelet's deviceplugin/v1beta1/api.proto,
# from Go's module cache), cached outside the repo under a key of its sources and that version
# ($CIFAR_TOOLS_CACHE, default ~/.cache/cifartrain/tools): a warm run does nothing. ~1 minute cold.
# Prints the directory holding the binary.
#   deploy/local-cluster/build-fake-gpu-plugin.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
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
echo "$out/bin"
