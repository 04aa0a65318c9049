#!/usr/bin/env bash
# Checks of the Helm chart deploy/helm/cifar-operator with Helm itself (deploy/tools/build.sh helm):
#   lint             `helm lint --strict` with the defaults and every value set of values/
#   schema           bad values are refused by values.schema.json or the templates, each with a
#                    message naming the value
#   rendered         the rendered CRD serves deploy/crds' schema, and deploy/manifests/operator.yaml
#                    is what render-manifests.sh writes (the chart's files/ themselves:
#                    deploy/helm/sync-chart-files.sh --check, ctest Helm.CopiesInSync)
#   dry-run KUBECONFIG
#                    every value set rendered with `helm template` and sent to a real API server
#                    with `kubectl apply --server-side --dry-run=server`, with the Prometheus
#                    Operator's CRDs served (so the ServiceMonitor, PodMonitor and PrometheusRule
#                    render and are validated) and without them (so they are skipped)
#   tests/helm/chart_test.sh lint|schema|rendered|dry-run [KUBECONFIG]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
chart=$repo/deploy/helm/cifar-operator
helm="$("$repo/deploy/tools/build.sh" helm)/helm"
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

lint() {
  "$helm" lint --strict "$chart"
  for values in "$here"/values/*.yaml; do
    "$helm" lint --strict "$chart" --namespace cifartrain-system -f "$values"
  done
}

# expect_refused SUBSTRING HELM_ARGS...: rendering must fail, with SUBSTRING in the message.
expect_refused() {
  local wanted=$1
  shift
  if "$helm" template cifar-operator "$chart" "$@" >"$work/out" 2>&1; then
    fail "helm template $* was accepted"
  fi
  grep -qF -- "$wanted" "$work/out" || { cat "$work/out" >&2; fail "helm template $*: no '$wanted' in the error"; }
  echo "refused as expected: $* -> $(grep -F -- "$wanted" "$work/out" | head -1)"
}

schema() {
  expect_refused "/replicaCount" --set replicaCount=-1
  expect_refused "/image/pullPolicy" --set image.pullPolicy=Sometimes
  expect_refused "/watchNamespace" --set watchNamespace=Team_A
  expect_refused "additional properties 'imageTag' not allowed" --set imageTag=v1
  expect_refused "/monitoring/podMonitor/interval" --set monitoring.podMonitor.interval=often
  expect_refused "/metricsPort" --set metricsPort=70000
  expect_refused "/workers" --set workers=0
  expect_refused "/crds/enabled" --set-string crds.enabled=yes
  expect_refused "replicaCount > 1 needs leaderElection.enabled=true" \
    --set replicaCount=2 --set leaderElection.enabled=false
  expect_refused "renewDeadlineSeconds must be less than" --set leaderElection.renewDeadlineSeconds=30
  expect_refused "serviceAccount.name is required" --set serviceAccount.create=false
}

rendered() {
  "$helm" template cifar-operator "$chart" --namespace cifartrain-system --show-only templates/crd.yaml >"$work/crd.yaml"
  python3 - "$work/crd.yaml" "$repo"/deploy/crds/*.yaml <<'PY' || fail "the chart's rendered CRD differs from deploy/crds"
import sys, yaml
rendered = {d["metadata"]["name"]: d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
for path in sys.argv[2:]:
    source = yaml.safe_load(open(path))
    name = source["metadata"]["name"]
    got = rendered.get(name)
    assert got is not None, f"{name} not rendered"
    assert got["spec"] == source["spec"], f"{name}: the rendered spec differs from {path}"
    assert got["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep", f"{name}: not kept on uninstall"
    print(f"{name}: the chart renders deploy/crds' schema, kept on uninstall")
PY
  "$repo/deploy/helm/render-manifests.sh" "$helm" | diff - "$repo/deploy/manifests/operator.yaml" ||
    fail "deploy/manifests/operator.yaml is stale: deploy/helm/render-manifests.sh HELM > deploy/manifests/operator.yaml"
}

dry_run() {
  local kubeconfig=${1:?dry-run needs a KUBECONFIG}
  local kubectl=(kubectl --kubeconfig "$kubeconfig")
  local crds monitoring_apis=() kinds
  crds=$("$repo/deploy/tools/build.sh" prometheus-operator-crds)
  for ns in helm-dry-run helm-team-a; do
    "${kubectl[@]}" create namespace "$ns" --dry-run=client -o yaml | "${kubectl[@]}" apply -f - >/dev/null
  done
  # Without the monitoring API: the chart skips its monitoring objects rather than failing.
  "$helm" template cifar-operator "$chart" -n helm-dry-run -f "$here/values/production.yaml" >"$work/plain.yaml"
  if grep -qE '^kind: (ServiceMonitor|PodMonitor|PrometheusRule)$' "$work/plain.yaml"; then
    fail "monitoring objects rendered for a cluster without monitoring.coreos.com/v1"
  fi
  "${kubectl[@]}" apply --server-side -f "$crds" >/dev/null
  for kind in ServiceMonitor PodMonitor PrometheusRule; do
    monitoring_apis+=(--api-versions "monitoring.coreos.com/v1/$kind")
  done
  local rendered
  for values in "$here"/values/*.yaml; do
    rendered=$work/rendered-$(basename "$values")
    "$helm" template cifar-operator "$chart" -n helm-dry-run -f "$values" "${monitoring_apis[@]}" >"$rendered"
    kinds=$(awk '/^kind:/ {print $2}' "$rendered" | sort | uniq -c | tr -s ' ' | tr '\n' ',')
    "${kubectl[@]}" apply --server-side --force-conflicts --field-manager=helm --dry-run=server \
      -f "$rendered" >"$work/applied" 2>&1 || { cat "$work/applied" >&2; fail "$(basename "$values"): the API server refused it"; }
    echo "$(basename "$values"): accepted by the API server:$kinds"
  done
  for kind in ServiceMonitor PodMonitor PrometheusRule ConfigMap; do
    grep -q "^kind: $kind$" "$work/rendered-production.yaml" || fail "production.yaml renders no $kind"
  done
}

case ${1:-} in
  lint) lint ;;
  schema) schema ;;
  rendered) rendered ;;
  dry-run) dry_run "${2:-}" ;;
  *) echo "usage: chart_test.sh lint|schema|rendered|dry-run [KUBECONFIG]" >&2; exit 2 ;;
esac
