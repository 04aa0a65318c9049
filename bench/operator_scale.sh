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
# shellcheck source=bench/support/control_plane.sh
. "$here/support/control_plane.sh"
# shellcheck source=bench/support/kubeflow.sh
. "$here/support/kubeflow.sh"
install_kubeflow
k wait --for=condition=Established --timeout=60s crd/cifartrainjobs.cifartrain.io >/dev/null

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
