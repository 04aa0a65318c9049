# shellcheck shell=bash
# Sourced by the operator benchmarks (with $here, k and free_port defined): Kubeflow's
# training-operator (bench/kubeflow/build.sh) as a process of this machine, against the cluster k
# reaches. install_kubeflow: its TFJob CRD, its namespace and the webhook configuration it needs
# before it starts; start_kubeflow NAMESPACE QPS BURST: it, watching NAMESPACE, ready
# ($operator_pid, its log in $log, its metrics at $operator_metrics); start_cifar NAMESPACE:
# cifar-operator alike ($build); stop_operator.
{ read -r kubeflow_bin; read -r kubeflow_src; } < <("$here/kubeflow/build.sh")

install_kubeflow() {  # idempotent
  k apply --server-side -f "$kubeflow_src/manifests/base/crds/kubeflow.org_tfjobs.yaml" >/dev/null
  # A CRD just created has no conditions yet, which `kubectl wait` takes for an error.
  for _ in $(seq 100); do
    k wait --for=condition=Established --timeout=60s crd/tfjobs.kubeflow.org >/dev/null 2>&1 && break
    sleep 0.1
  done
  k wait --for=condition=Established --timeout=1s crd/tfjobs.kubeflow.org >/dev/null
  k create namespace kubeflow --dry-run=client -o yaml | k apply -f - >/dev/null
  k -n kubeflow create secret generic training-operator-webhook-cert --dry-run=client -o yaml |
    k apply -f - >/dev/null
  k apply -f "$here/kubeflow/webhook.yaml" >/dev/null
}

wait_ready() {  # url, seconds
  for _ in $(seq $(($2 * 10))); do
    [ "$(curl -s "$1" 2>/dev/null)" = ok ] && return 0
    kill -0 "$operator_pid" 2>/dev/null || { echo "the operator exited; its log:" >&2; cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  echo "the operator was not ready after $2 s; its log:" >&2
  cat "$log" >&2
  exit 1
}

start_cifar() {  # namespace
  local health metrics
  health=$(free_port)
  metrics=$(free_port)
  operator_metrics=http://127.0.0.1:$metrics/metrics
  "$root/$build/bin/cifar-operator" --kubeconfig "$kubeconfig" --namespace "$1" --no-leader-elect \
    --metrics-port "$metrics" --health-port "$health" >"$log" 2>&1 &
  operator_pid=$!
  wait_ready "http://127.0.0.1:$health/readyz" 60
}

# The training-operator waits for its cert rotator's Secret to appear as files in
# /tmp/k8s-webhook-server/serving-certs (a path it does not let us choose), where a pod mounts the
# Secret: here we play the kubelet and copy the Secret there. One benchmark per machine at a time.
start_kubeflow() {  # namespace, qps, burst
  local health metrics certs=/tmp/k8s-webhook-server/serving-certs
  health=$(free_port)
  metrics=$(free_port)
  operator_metrics=http://127.0.0.1:$metrics/metrics
  rm -rf "$certs"
  mkdir -p "$certs"
  MY_POD_NAMESPACE=kubeflow "$kubeflow_bin" --kubeconfig "$kubeconfig" \
    --namespace "$1" --enable-scheme=tfjob --kube-api-qps "$2" --kube-api-burst "$3" \
    --metrics-bind-address "127.0.0.1:$metrics" --health-probe-bind-address "127.0.0.1:$health" \
    --webhook-server-port "$(free_port)" --zap-devel=false >"$log" 2>&1 &
  operator_pid=$!
  for _ in $(seq 300); do
    k -n kubeflow get secret training-operator-webhook-cert -o jsonpath='{.data.ca\.crt}' | grep -q . && break
    sleep 0.1
  done
  for f in tls.crt tls.key ca.crt; do  # each file whole or not at all: the operator polls them
    k -n kubeflow get secret training-operator-webhook-cert -o jsonpath="{.data.${f//./\\.}}" | base64 -d >"$certs/.$f"
    mv "$certs/.$f" "$certs/$f"
  done
  wait_ready "http://127.0.0.1:$health/readyz" 60
}

stop_operator() {
  kill "$operator_pid" && wait "$operator_pid" 2>/dev/null || true
  operator_pid=""
}
