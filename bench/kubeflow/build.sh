#!/usr/bin/env bash
# Builds Kubeflow's training-operator (the reference of bench/operator_scale.sh) from its Go
# module at the pinned release, cached outside the repo ($CIFAR_KUBEFLOW_CACHE, default
# ~/.cache/cifartrain/kubeflow): a warm run does nothing. Prints two lines: the binary, and the
# module's source directory (its CRDs are under manifests/base/crds).
#   bench/kubeflow/build.sh
set -euo pipefail
version=v1.9.3
module=github.com/kubeflow/training-operator
out=${CIFAR_KUBEFLOW_CACHE:-$HOME/.cache/cifartrain/kubeflow}/training-operator-$version
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
if [ ! -x "$out/training-operator.v1" ]; then
  echo "building $module/cmd/training-operator.v1@$version into $out" >&2
  GOBIN="$out" go install -trimpath -ldflags="-s -w" "$module/cmd/training-operator.v1@$version" >&2
fi
echo "$out/training-operator.v1"
go mod download -json "$module@$version" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])'
