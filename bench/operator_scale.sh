#!/usr/bin/env bash
# cifar-operator against Kubeflow's training-operator (release 1.9, built from its Go module by
# bench/kubeflow/build.sh) on the same real kube-apiserver + etcd (a private control plane): each
# operator in turn handles JOBS jobs of 1 PS, 1 master, 4 workers and 1 evaluator (CifarTrainJobs,
# or TFJobs of the same shape) submitted into an empty namespace it watches; bench-operator-scale
# reports the time from the first submission to the last pod created, the operator's CPU seconds
# until it is idle again, and its peak RSS. Kubeflow runs twice: with its default client rate
# limit (--kube-api-qps 20 --kube-api-burst 30) and with the limit lifted (1000/2000), since
# cifar-operator has none. Both without leader election (Kubeflow's default). Medians of ROUNDS
# rounds, the operators alternating within a round; a fresh operator process per run.
#   bench/operator_scale.sh [build-dir] [jobs]      ROUNDS=3 by default
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-build}
jobs=${2:-100}
rounds=${ROUNDS:-3}
{ read -r kubeflow_bin; read -r kubeflow_src; } < <("$here/kubeflow/build.sh")
# shellcheck source=bench/support/control_plane.sh
. "$here/support/control_plane.sh"
k apply --server-side -f "$kubeflow_src/manifests/base/crds/kubeflow.org_tfjobs.yaml" >/dev/null
k wait --for=condition=Established --timeout=60s crd/cifartrainjobs.cifartrain.io crd/tfjobs.kubeflow.org >/dev/null
k create namespace kubeflow >/dev/null
k -n kubeflow create secret generic training-operator-webhook-cert >/dev/null
k create -f "$here/kubeflow/webhook.yaml" >/dev/null

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
  local health
  health=$(free_port)
  "$root/$build/bin/cifar-operator" --kubeconfig "$kubeconfig" --namespace "$1" --no-leader-elect \
    --metrics-port "$(free_port)" --health-port "$health" >"$log" 2>&1 &
  operator_pid=$!
  wait_ready "http://127.0.0.1:$health/readyz" 60
}
# The training-operator waits for its cert rotator's Secret to appear as files in
# /tmp/k8s-webhook-server/serving-certs (a path it does not let us choose), where a pod mounts the
# Secret: here we play the kubelet and copy the Secret there. One benchmark per machine at a time.
start_kubeflow() {  # namespace, qps, burst
  local health certs=/tmp/k8s-webhook-server/serving-certs
  health=$(free_port)
  rm -rf "$certs"
  mkdir -p "$certs"
  MY_POD_NAMESPACE=kubeflow "$kubeflow_bin" --kubeconfig "$kubeconfig" \
    --namespace "$1" --enable-scheme=tfjob --kube-api-qps "$2" --kube-api-burst "$3" \
    --metrics-bind-address "127.0.0.1:$(free_port)" --health-probe-bind-address "127.0.0.1:$health" \
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
# Removes the namespace's jobs, pods and services (no garbage collector runs here).
clear_namespace() {
  k -n "$1" delete cifartrainjobs,tfjobs,pods,services --all --wait=false >/dev/null
}

# Warm-up, no operator running: the API server's first objects of a kind are slow (schema and
# CEL compilation), which would otherwise count against whichever operator runs first.
"$root/$build/bin/bench-operator-scale" --kubeconfig "$kubeconfig" --namespace bench-warm-up \
  --kind cifar --jobs 20 --submit-only >/dev/null
"$root/$build/bin/bench-operator-scale" --kubeconfig "$kubeconfig" --namespace bench-warm-up \
  --kind tfjob --jobs 20 --submit-only >/dev/null
clear_namespace bench-warm-up

results=$work/results.txt
for round in $(seq "$rounds"); do
  for run in cifar kubeflow-default kubeflow-unthrottled; do
    ns=bench-$run-$round
    log=$work/$ns.log
    case $run in
      cifar) start_cifar "$ns"; kind=cifar ;;
      kubeflow-default) start_kubeflow "$ns" 20 30; kind=tfjob ;;
      kubeflow-unthrottled) start_kubeflow "$ns" 1000 2000; kind=tfjob ;;
    esac
    line=$("$root/$build/bin/bench-operator-scale" --kubeconfig "$kubeconfig" --namespace "$ns" \
      --kind "$kind" --jobs "$jobs" --operator-pid "$operator_pid") || { cat "$log"; exit 1; }
    echo "round $round $run: $line" >&2
    echo "$run $line" >>"$results"
    stop_operator
    clear_namespace "$ns"
  done
done

# Medians per operator, and the ratios against Kubeflow.
python3 - "$results" "$jobs" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, _kind, *fields = line.split()
    values = dict(f.split("=") for f in fields)
    rows.setdefault(name, []).append({k: float(v) for k, v in values.items()})
med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for n, rs in rows.items()}
print(f"{sys.argv[2]} jobs x 7 pods, medians of {len(rows['cifar'])} rounds\n")
print("| operator | submit s | first submission -> all pods s | CPU s | peak RSS MiB |")
print("|---|---:|---:|---:|---:|")
names = {"cifar": "cifar-operator", "kubeflow-default": "training-operator v1.9.3 (qps 20)",
         "kubeflow-unthrottled": "training-operator v1.9.3 (qps 1000)"}
for n in ["cifar", "kubeflow-default", "kubeflow-unthrottled"]:
    m = med[n]
    print(f"| {names[n]} | {m['submit_s']:.2f} | {m['all_pods_s']:.2f} | {m['cpu_s']:.2f} | {m['peak_rss_mib']:.1f} |")
for n in ["kubeflow-default", "kubeflow-unthrottled"]:
    c, k = med["cifar"], med[n]
    print(f"\ncifar-operator / {names[n]}: time to all pods {c['all_pods_s'] / k['all_pods_s']:.2f}x, "
          f"CPU {c['cpu_s'] / k['cpu_s']:.2f}x, peak RSS {c['peak_rss_mib'] / k['peak_rss_mib']:.2f}x")
PY
