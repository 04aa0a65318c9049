#!/usr/bin/env bash
# Applies deploy/prometheus (kustomization.yaml: in-cluster.yaml and the ConfigMaps of the config
# and the rules) to a real API server and checks what it made: the API server accepts every
# object; the Deployment mounts ConfigMaps that exist, holding prometheus.yml and every rule file
# its projected volume names; the Prometheus service account may list and watch pods in every
# namespace (what kubernetes_sd_configs needs) and nothing more (no secrets, no writes). Without
# a kubelet no Prometheus pod runs: the e2e tests run Prometheus on the host (render-config.sh).
# Deletes it at the end, but for the namespace.
#   tests/monitoring/in-cluster.sh KUBECONFIG
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
kubectl=(kubectl --kubeconfig "${1:?usage: in-cluster.sh KUBECONFIG}")
dir=$repo/deploy/prometheus
ns=cifartrain-monitoring
sa=system:serviceaccount:$ns:prometheus
# What kustomize makes of the directory, as JSON.
objects=$("${kubectl[@]}" apply -k "$dir" --dry-run=client -o json)
# At the end, every object but the namespace: where no controller-manager runs (the integration
# tests' control plane) a deleted namespace stays Terminating for good and a second run could not
# apply.
cleanup() {
  jq -r '.items[] | select(.kind != "Namespace") | "\(.kind)/\(.metadata.name)"' <<<"$objects" |
    xargs "${kubectl[@]}" -n "$ns" delete --ignore-not-found --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() { echo "in-cluster.sh: $*" >&2; exit 1; }

"${kubectl[@]}" apply -k "$dir"
deployment=$("${kubectl[@]}" -n "$ns" get deployment prometheus -o json)
config_map=$(jq -r '.spec.template.spec.volumes[] | select(.name == "config") | .projected.sources[0].configMap.name' <<<"$deployment")
rules_map=$(jq -r '.spec.template.spec.volumes[] | select(.name == "config") | .projected.sources[1].configMap.name' <<<"$deployment")
"${kubectl[@]}" -n "$ns" get configmap "$config_map" -o json | jq -j '.data["prometheus.yml"]' |
  diff - "$dir/prometheus.yml" >/dev/null || fail "ConfigMap $config_map does not hold prometheus.yml"
rules=$("${kubectl[@]}" -n "$ns" get configmap "$rules_map" -o json)
for key in $(jq -r '.spec.template.spec.volumes[] | select(.name == "config") | .projected.sources[1].configMap.items[].key' <<<"$deployment"); do
  jq -j --arg k "$key" '.data[$k] // empty' <<<"$rules" | diff - "$dir/rules/$key" >/dev/null ||
    fail "ConfigMap $rules_map does not hold rules/$key"
done
# Every rule file of the directory is mounted (a new one needs an item in in-cluster.yaml).
for file in "$dir"/rules/*.yaml; do
  jq -e --arg k "$(basename "$file")" '.spec.template.spec.volumes[] | select(.name == "config") |
    .projected.sources[1].configMap.items[] | select(.key == $k and .path == "rules/" + $k)' \
    <<<"$deployment" >/dev/null || fail "rules/$(basename "$file") is not mounted under rules/"
done

# can VERB RESOURCE [NAMESPACE]: yes or no for the service account.
can() {
  local scope=(--all-namespaces)
  [ -n "${3:-}" ] && scope=(-n "$3")
  "${kubectl[@]}" auth can-i "$1" "$2" --as="$sa" "${scope[@]}" 2>/dev/null || true
}
for verb in get list watch; do
  [ "$(can "$verb" pods)" = yes ] || fail "the service account may not $verb pods in every namespace"
done
for denied in "list secrets" "create pods" "delete pods" "list nodes" "get configmaps"; do
  [ "$(can $denied default)" = no ] || fail "the service account may $denied"
done
echo "in-cluster.sh: deploy/prometheus applies; mounts and permissions as expected"
