#!/usr/bin/env bash
# Builds the real control plane the operator's integration tests run against: kube-apiserver
# (k8s.io/kubernetes, pinned in kubernetes/go.mod, its staging modules replaced by their tags)
# and etcd (pinned in etcd/go.mod), from the Go module proxy. Cached outside the repo by version
# ($CIFAR_CONTROL_PLANE_CACHE, default ~/.cache/cifartrain/control-plane): a warm run does nothing.
# The first build takes 10-20 minutes on 2 cores. Prints the directory holding the binaries.
# With `node`, also the parts of a one-node cluster (tests/e2e/cluster): kubelet, kube-scheduler,
# kube-controller-manager and kube-proxy from the same k8s.io/kubernetes in one `go build`
# (~7 minutes cold), and CoreDNS (pinned in tests/e2e/cluster/coredns/go.mod, ~3 minutes).
#   tests/integration/control-plane/build.sh [node]
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
# Several main packages build in one `go build` (they share most of their dependencies), into a
# staging directory whose binaries are moved into place only once all were written. A binary is
# named after its package's last element (cmd/kubelet: kubelet), or NAME=PACKAGE names it.
build() {  # module dir, extra ldflags, [NAME=]package...
  local module=$1 ldflags=$2
  shift 2
  local missing=() names=() item name
  for item in "$@"; do
    name=${item%%=*}
    [ "$name" = "$item" ] && name=$(basename "$item")
    [ -x "$out/bin/$name" ] || { missing+=("${item#*=}"); names+=("$name"); }
  done
  ((${#missing[@]})) || return 0
  local work="$out/src/$(basename "$module")" staging="$out/bin/partial"
  rm -rf "$staging" && mkdir -p "$work" "$staging"
  cp "$module/go.mod" "$module/go.sum" "$work/"
  echo "building ${names[*]} into $out/bin" >&2
  local target="$staging/"  # several packages: one binary each in the directory
  ((${#missing[@]} == 1)) && target="$staging/${names[0]}"
  (cd "$work" && go build -p 2 -trimpath -tags=selinux,notest,grpcnotrace \
    -ldflags="all=-s -w $ldflags" -o "$target" "${missing[@]}")
  for name in "${names[@]}"; do mv "$staging/$name" "$out/bin/$name"; done
  rmdir "$staging"
}

minor=${kube_version#v1.}
minor=${minor%%.*}
version_flags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $p.gitVersion=$kube_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  version_flags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
build "$here/etcd" "" etcd=go.etcd.io/etcd/server/v3
build "$here/kubernetes" "$version_flags" k8s.io/kubernetes/cmd/kube-apiserver
if [ "${1:-}" = node ]; then
  build "$here/kubernetes" "$version_flags" k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-proxy
  coredns_module="$here/../../e2e/cluster/coredns"
  coredns_version=$(awk '$1 == "github.com/coredns/coredns" {print $2; exit}' "$coredns_module/go.mod")
  [ "$(cat "$out/bin/coredns.version" 2>/dev/null)" = "$coredns_version" ] || rm -f "$out/bin/coredns"
  build "$coredns_module" "" github.com/coredns/coredns
  echo "$coredns_version" >"$out/bin/coredns.version"
fi
echo "$out/bin"
