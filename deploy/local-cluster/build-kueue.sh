#!/usr/bin/env bash
# Builds Kueue's manager (sigs.k8s.io/kueue, pinned in modules/kueue/go.mod) from the Go module
# proxy, for kueue.sh, which makes it an image and installs it on the local cluster. Cached outside
# the repo by version, beside the cluster's parts (build.sh): $CIFAR_CONTROL_PLANE_CACHE, default
# ~/.cache/cifartrain/control-plane, in kueue-VERSION; a warm run does nothing (~3 minutes cold).
# Prints the directory holding `manager`.
#   deploy/local-cluster/build-kueue.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/go-build.sh
source "$here/../../scripts/go-build.sh"
version=$(go_mod_pin "$here/modules/kueue/go.mod" sigs.k8s.io/kueue)
out=${CIFAR_CONTROL_PLANE_CACHE:-$HOME/.cache/cifartrain/control-plane}/kueue-$version
mkdir -p "$out/bin"

require_go "$here/modules/kueue" "kueue $version"
p=sigs.k8s.io/kueue/pkg/version
go_build "$out" "$here/modules/kueue" "" \
  "-X $p.GitVersion=$version -X $p.GitCommit=$version -X $p.BuildDate=1970-01-01T00:00:00Z" \
  manager=sigs.k8s.io/kueue/cmd/kueue
echo "$out/bin"
