#!/usr/bin/env bash
# Writes deploy/manifests/operator.yaml from the Helm chart, for users who install with kubectl
# alone: the chart's default values in namespace cifartrain-system, without the CRD (that is
# deploy/crds/, applied first) and without the `helm test` pod. tests/helm checks that the
# committed file is what this writes.
#   deploy/helm/render-manifests.sh HELM > deploy/manifests/operator.yaml
set -euo pipefail
helm=${1:?usage: render-manifests.sh HELM_BINARY}
chart=$(cd "$(dirname "$0")/cifar-operator" && pwd)
cat <<'HEADER'
# cifar-operator as a Deployment in namespace cifartrain-system, with its least-privilege RBAC:
# the Helm chart (deploy/helm/cifar-operator) rendered with its default values by
# deploy/helm/render-manifests.sh. Do not edit: change the chart and render again. The CRD comes
# first (deploy/crds/). Prefer `helm install` (README, "Install with Helm").
#   kubectl apply --server-side -f deploy/crds/ && kubectl apply -f deploy/manifests/operator.yaml
apiVersion: v1
kind: Namespace
metadata:
  name: cifartrain-system
HEADER
"$helm" template cifar-operator "$chart" --namespace cifartrain-system \
  --set crds.enabled=false --skip-tests
