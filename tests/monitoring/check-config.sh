#!/usr/bin/env bash
# Checks deploy/prometheus's configuration with the pinned promtool in both of its forms: as it is
# (a Prometheus in the cluster, in-cluster credentials) and as render-config.sh makes it for a
# Prometheus outside the cluster (kubeconfig_file in every kubernetes_sd_configs entry, absolute
# rule_files). `promtool check config` also checks the rule files the config names: the test
# makes sure it found them (a rule_files glob that matches nothing passes silently).
#   tests/monitoring/check-config.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
promtool=$repo/tests/monitoring/promtool.sh
config=$repo/deploy/prometheus/prometheus.yml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check-config.sh: $*" >&2; exit 1; }

# check CONFIG RULES_FILE: promtool passes it, and it checked RULES_FILE among its rule files.
check() {
  local out
  out=$("$promtool" check config "$1" 2>&1) || { echo "$out" >&2; fail "promtool rejects $1"; }
  echo "$out"
  grep -qxF "Checking $2" <<<"$out" || fail "$1: promtool did not check the rule file $2"
}

echo "--- in the cluster: $config"
check "$config" "$repo/deploy/prometheus/rules/cifartrain-alerts.yaml"

# A kubeconfig like the local cluster's (deploy/local-cluster; certificates as files). promtool reads the config; it
# does not connect, so the server need not run.
mkdir -p "$tmp/cluster dir/pki"
cat >"$tmp/cluster dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: https://10.244.0.1:6443, certificate-authority: $tmp/cluster dir/pki/ca.crt}
users:
- name: admin
  user: {client-certificate: $tmp/cluster dir/pki/admin.crt, client-key: $tmp/cluster dir/pki/admin.key}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
KUBECONFIG
# From another directory and with a relative kubeconfig path: the output must not depend on it.
(cd "$tmp" && "$repo/deploy/prometheus/render-config.sh" "cluster dir/kubeconfig") >"$tmp/host.yml"
echo "--- outside the cluster: render-config.sh KUBECONFIG"
check "$tmp/host.yml" "$repo/deploy/prometheus/rules/cifartrain-alerts.yaml"
entries=$(grep -c '^[[:space:]]*kubernetes_sd_configs:' "$config")
given=$(grep -cF "kubeconfig_file: '$tmp/cluster dir/kubeconfig'" "$tmp/host.yml")
[ "$entries" -ge 2 ] && [ "$given" -eq "$entries" ] ||
  fail "rendered config names the kubeconfig $given times for $entries kubernetes_sd_configs entries"
# Nothing else changed: the rendered config less the added lines and the rule path is the source.
diff <(grep -vx " *kubeconfig_file: '.*'" "$tmp/host.yml" | sed "s|'$repo/deploy/prometheus/rules/\*.yaml'|rules/*.yaml|") \
  "$config" >/dev/null || fail "render-config.sh changed more than kubeconfig_file and rule_files"
# The script refuses a config that already chose its API server.
if "$repo/deploy/prometheus/render-config.sh" "$tmp/cluster dir/kubeconfig" "$tmp/host.yml" >/dev/null 2>&1; then
  fail "render-config.sh rendered a config that already names kubeconfig_file"
fi
echo "check-config.sh: both configurations pass"
