#!/usr/bin/env bash
# The sandbox ("pause") image of the local cluster's nodes, which cannot be pulled here: Kubernetes' own
# build/pause/linux/pause.c from the pinned k8s.io/kubernetes module, compiled static, as an image
# of that one file. Written to OUT_TAR (docker-archive) once; a present OUT_TAR is kept.
#   deploy/local-cluster/build-pause.sh OUT_TAR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
[ -f "$out" ] && exit 0
# shellcheck source=../../scripts/go-build.sh
source "$here/../../scripts/go-build.sh"
version=$(go_mod_pin "$here/modules/kubernetes/go.mod" k8s.io/kubernetes)
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
source=$(cd "$here/modules/kubernetes" && go mod download -json "k8s.io/kubernetes@$version" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/build/pause/linux/pause.c
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -Os -static -DVERSION=$version -o "$work/pause" "$source"
strip "$work/pause"
printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$work/Containerfile"
podman build --quiet -t localhost/cifartrain/pause:dev "$work" >/dev/null
mkdir -p "$(dirname "$out")"
podman save --quiet --format docker-archive -o "$out.partial" localhost/cifartrain/pause:dev
mv "$out.partial" "$out"
