#!/usr/bin/env bash
# Builds the tools that come from Go modules, for deploy/ and tests/ alike: Helm (the local
# cluster installs the operator with it; deploy/kind/create-cluster.sh without a helm on PATH),
# Prometheus + promtool, the kind CLI (create-cluster.sh) with the checker of kind's cluster
# configs (tests/kind), SeaweedFS (a real S3-compatible object store: the storage tests and the
# local cluster's checkpoint bucket), the local cluster's NetworkPolicy enforcement
# (kube-network-policies), hangfs (a FUSE view of a directory whose reads can be made to hang:
# the stall tests' dataset volume that stops answering), kwok (the simulated nodes of
# deploy/sim-cluster), and fetches the Prometheus Operator's CRDs (tests/helm). Each is a
# directory here whose go.mod pins it (with any local sources); the binaries are cached outside
# the repo ($CIFAR_TOOLS_CACHE, default ~/.cache/cifartrain/tools) under a key of that
# directory's contents (not of its path), so a warm run does nothing and a new pin rebuilds.
# Prints the directory holding the binaries.
#   deploy/tools/build.sh helm|prometheus|kind|seaweedfs|kube-network-policies|hangfs|kwok|prometheus-operator-crds
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tool=${1:?usage: build.sh helm|prometheus|kind|seaweedfs|kube-network-policies|hangfs|kwok|prometheus-operator-crds}
module=$here/$tool
[ -f "$module/go.mod" ] || { echo "build.sh: no tool '$tool' (no $module/go.mod)" >&2; exit 1; }
source "$here/../../scripts/go-build.sh"
require_go "$module" "$tool"
key=$(cd "$module" && find . -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)
out=${CIFAR_TOOLS_CACHE:-$HOME/.cache/cifartrain/tools}/$tool-$key
mkdir -p "$out/bin"
# module_dir MODULE@VERSION: the module's files in Go's module cache (downloaded if needed), run
# outside any module so that the download leaves our go.mod and go.sum alone.
module_dir() {
  (cd "$out" && GOTOOLCHAIN=local GOFLAGS='' go mod download -json "$1" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}
version() { go_mod_pin "$module/go.mod" "$1"; }

case $tool in
  helm)
    v=$(version helm.sh/helm/v4)
    go_build "$out" "$module" "" "-X helm.sh/helm/v4/internal/version.version=$v" helm.sh/helm/v4/cmd/helm
    ;;
  prometheus-operator-crds)
    # Not a binary: the Prometheus Operator's CRDs (ServiceMonitor, PodMonitor, PrometheusRule),
    # from its module's example/ directory, for validating the chart's monitoring objects.
    v=$(version github.com/prometheus-operator/prometheus-operator)
    if [ ! -f "$out/crds/monitoring.coreos.com_prometheusrules.yaml" ]; then
      src=$(module_dir "github.com/prometheus-operator/prometheus-operator@$v")
      mkdir -p "$out/crds.partial"
      for kind in servicemonitors podmonitors prometheusrules; do
        cp "$src/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$out/crds.partial/"
      done
      rm -rf "$out/crds" && mv "$out/crds.partial" "$out/crds"
    fi
    echo "$out/crds"
    exit 0
    ;;
  kind)
    # kind-config-check (kind's config loader and validation on our files) and the kind CLI of
    # the same pinned version; and the node image's containerd config, as kind's module ships it
    # (images/base/files/etc/containerd/config.toml): what kind patches on every node.
    go_build "$out" "$module" "" "" cifartrain.io/tools/kind/cmd/kind-config-check kind=sigs.k8s.io/kind
    config=$out/share/kind/containerd-config.toml
    if [ ! -f "$config" ]; then
      v=$(version sigs.k8s.io/kind)
      dir=$(module_dir "sigs.k8s.io/kind@$v")
      mkdir -p "$(dirname "$config")"
      rm -f "$config.partial"
      cp "$dir/images/base/files/etc/containerd/config.toml" "$config.partial"
      mv "$config.partial" "$config"
    fi
    ;;
  prometheus)
    # Module v0.3MM.P is Prometheus 3.MM.P. Only Kubernetes service discovery of the optional
    # ones (plugins/plugin_*.go's build tags; file, http and static stay): a smaller, faster
    # build without every cloud SDK. No `builtinassets`: the module carries no built web UI, and
    # the API (what tests and Grafana use) needs none.
    v=$(version github.com/prometheus/prometheus)
    n=${v#v0.}
    minor=${n%%.*}
    release=$((minor / 100)).$((minor % 100)).${n#*.}
    p=github.com/prometheus/common/version
    go_build "$out" "$module" remove_all_sd,enable_kubernetes_sd \
      "-X $p.Version=$release -X $p.Revision=$v -X $p.Branch=$v -X $p.BuildUser=cifartrain -X $p.BuildDate=19700101-00:00:00" \
      github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
    ;;
  kube-network-policies)
    # network-policy-agent: kube-network-policies' controller started for a node of the local
    # cluster (its main package assumes a pod's in-cluster config; cmd/network-policy-agent says why).
    go_build "$out" "$module" "" "" cifartrain.io/tools/kube-network-policies/cmd/network-policy-agent
    # ... and the AdminNetworkPolicy CRD it watches (start.sh installs it), from the API's module.
    crd=policy.networking.k8s.io_adminnetworkpolicies.yaml
    if [ ! -f "$out/bin/$crd" ]; then
      src=$(module_dir "sigs.k8s.io/network-policy-api@$(version sigs.k8s.io/network-policy-api)")
      cp "$src/config/crd/standard/$crd" "$out/bin/$crd.partial" && mv "$out/bin/$crd.partial" "$out/bin/$crd"
    fi
    ;;
  kwok)
    # kwok's controller alone (not kwokctl: the control plane is the local cluster's own).
    go_build "$out" "$module" "" "" sigs.k8s.io/kwok/cmd/kwok
    ;;
  hangfs)
    go_build "$out" "$module" "" "" cifartrain.io/tools/hangfs
    ;;
  seaweedfs)
    # Its releases are tagged 4.NN, not semver: the pin is a pseudo-version, whose commit the
    # binary reports (weed version).
    v=$(version github.com/seaweedfs/seaweedfs)
    go_build "$out" "$module" "" "-X github.com/seaweedfs/seaweedfs/weed/util/version.COMMIT=${v##*-}" \
      github.com/seaweedfs/seaweedfs/weed
    ;;
  *)
    echo "build.sh: no build recipe for '$tool'" >&2
    exit 1
    ;;
esac
echo "$out/bin"
