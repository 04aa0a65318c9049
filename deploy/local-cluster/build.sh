#!/usr/bin/env bash
# Builds the local cluster's parts from the Go module proxy: kube-apiserver (k8s.io/kubernetes,
# pinned in modules/kubernetes/go.mod, its staging modules replaced by their tags) and etcd
# (pinned in modules/etcd/go.mod), which are also the control plane of the operator's
# integration tests. Cached outside the repo by version
# ($CIFAR_CONTROL_PLANE_CACHE, default ~/.cache/cifartrain/control-plane): a warm run does nothing.
# The first build takes 10-20 minutes on 2 cores. Prints the directory holding the binaries.
# With `node`, also the parts of the nodes (start.sh): kubelet, kube-scheduler,
# kube-controller-manager and kube-proxy from the same k8s.io/kubernetes in one `go build`
# (~7 minutes cold), and CoreDNS (pinned in modules/coredns/go.mod, ~3 minutes).
# With `kind`, also kubeadm and kubectl, which deploy/kind/build-node-image.sh puts with the node
# parts into a kind node image.
# Kueue's manager, which the cluster runs only when kueue.sh installs it, is build-kueue.sh's.
#   deploy/local-cluster/build.sh [node|kind]
set -euo pipefail
case ${1:-} in
  "" | node | kind) ;;
  *) echo "usage: build.sh [node|kind] (Kueue's manager: build-kueue.sh)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/go-build.sh
source "$here/../../scripts/go-build.sh"
kube_version=$(go_mod_pin "$here/modules/kubernetes/go.mod" k8s.io/kubernetes)
etcd_version=$(go_mod_pin "$here/modules/etcd/go.mod" go.etcd.io/etcd/server/v3)
out=${CIFAR_CONTROL_PLANE_CACHE:-$HOME/.cache/cifartrain/control-plane}/k8s-$kube_version-etcd-$etcd_version
mkdir -p "$out/bin"

require_go "$here/modules/kubernetes" "kube-apiserver $kube_version"
command -v kubectl >/dev/null || { echo "build.sh: kubectl is not on PATH" >&2; exit 1; }

tags=selinux,notest,grpcnotrace
minor=${kube_version#v1.}
minor=${minor%%.*}
version_flags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $p.gitVersion=$kube_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  version_flags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
go_build "$out" "$here/modules/etcd" "$tags" "" etcd=go.etcd.io/etcd/server/v3
go_build "$out" "$here/modules/kubernetes" "$tags" "$version_flags" k8s.io/kubernetes/cmd/kube-apiserver
if [ -n "${1:-}" ]; then
  go_build "$out" "$here/modules/kubernetes" "$tags" "$version_flags" k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-proxy
  coredns_module="$here/modules/coredns"
  coredns_version=$(go_mod_pin "$coredns_module/go.mod" github.com/coredns/coredns)
  [ "$(cat "$out/bin/coredns.version" 2>/dev/null)" = "$coredns_version" ] || rm -f "$out/bin/coredns"
  go_build "$out" "$coredns_module" "$tags" "" github.com/coredns/coredns
  echo "$coredns_version" >"$out/bin/coredns.version"
fi
if [ "${1:-}" = kind ]; then
  go_build "$out" "$here/modules/kubernetes" "$tags" "$version_flags" k8s.io/kubernetes/cmd/kubeadm \
    k8s.io/kubernetes/cmd/kubectl
fi
echo "$out/bin"
