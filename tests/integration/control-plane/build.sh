#!/usr/bin/env bash
# Builds the real control plane the operator's integration tests run against: kube-apiserver
# (k8s.io/kubernetes, pinned in kubernetes/go.mod, its staging modules replaced by their tags)
# and etcd (pinned in etcd/go.mod), from the Go module proxy. Cached outside the repo by version
# ($CIFAR_CONTROL_PLANE_CACHE, default ~/.cache/cifartrain/control-plane): a warm run does nothing.
# The first build takes 10-20 minutes on 2 cores. Prints the directory holding the binaries.
#   tests/integration/control-plane/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kube_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$here/kubernetes/go.mod")
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$here/etcd/go.mod")
out=${CIFAR_CONTROL_PLANE_CACHE:-$HOME/.cache/cifartrain/control-plane}/k8s-$kube_version-etcd-$etcd_version
mkdir -p "$out/bin"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

# The Go of the machine builds them (no toolchain download); kubectl is the tests' client.
needed_go=$(awk '$1 == "go" {print $2; exit}' "$here/kubernetes/go.mod")
have_go=$(go env GOVERSION 2>/dev/null | sed 's/^go//') || true
if [ -z "$have_go" ] || [ "$(printf '%s\n%s\n' "$needed_go" "$have_go" | sort -V | head -1)" != "$needed_go" ]; then
  echo "build.sh: kube-apiserver $kube_version needs Go >= $needed_go; this machine has '${have_go:-no go}'" >&2
  exit 1
fi
command -v kubectl >/dev/null || { echo "build.sh: kubectl is not on PATH" >&2; exit 1; }

# Each module is built in a copy, so that the build never rewrites the committed go.mod/go.sum.
build() {  # module dir, output name, package, extra ldflags
  local module=$1 name=$2 package=$3 ldflags=$4
  [ -x "$out/bin/$name" ] && return
  local work="$out/src/$(basename "$module")"
  mkdir -p "$work"
  cp "$module/go.mod" "$module/go.sum" "$work/"
  echo "building $name ($package) into $out/bin" >&2
  (cd "$work" && go build -p 2 -trimpath -tags=selinux,notest,grpcnotrace \
    -ldflags="all=-s -w $ldflags" -o "$out/bin/$name.partial" "$package")
  mv "$out/bin/$name.partial" "$out/bin/$name"
}

minor=${kube_version#v1.}
minor=${minor%%.*}
version_flags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $p.gitVersion=$kube_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  version_flags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
build "$here/etcd" etcd go.etcd.io/etcd/server/v3 ""
build "$here/kubernetes" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$version_flags"
echo "$out/bin"
