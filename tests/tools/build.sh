#!/usr/bin/env bash
# Builds the test tools that come from Go modules: Helm, Prometheus + promtool, and the loader of
# kind's cluster configs. Each is a directory here whose go.mod pins it (with any local sources);
# the binaries are cached outside the repo ($CIFAR_TOOLS_CACHE, default ~/.cache/cifartrain/tools)
# under a key of that directory's contents, so a warm run does nothing and a new pin rebuilds.
# Prints the directory holding the binaries.
#   tests/tools/build.sh helm|prometheus|kind
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tool=${1:?usage: build.sh helm|prometheus|kind}
module=$here/$tool
[ -f "$module/go.mod" ] || { echo "build.sh: no tool '$tool' (no $module/go.mod)" >&2; exit 1; }
source "$here/go-build.sh"
require_go "$module" "$tool"
key=$(cd "$module" && find . -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)
out=${CIFAR_TOOLS_CACHE:-$HOME/.cache/cifartrain/tools}/$tool-$key
mkdir -p "$out/bin"
version() { awk -v m="$1" '($1 == "require" && $2 == m) || $1 == m {print ($1 == m ? $2 : $3); exit}' "$module/go.mod"; }

case $tool in
  helm)
    v=$(version helm.sh/helm/v4)
    go_build "$out" "$module" "" "-X helm.sh/helm/v4/internal/version.version=$v" helm.sh/helm/v4/cmd/helm
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
  *)
    echo "build.sh: no build recipe for '$tool'" >&2
    exit 1
    ;;
esac
echo "$out/bin"
