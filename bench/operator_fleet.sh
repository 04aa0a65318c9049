#!/usr/bin/env bash
# cifar-operator beside Kubeflow's training-operator (v1.9.3, bench/kubeflow/build.sh) on the
# simulated fleet (deploy/sim-cluster: `make cluster-sim NODES=1000`, started before this): for
# each count of jobs, that many jobs of 9 pods (1 PS, 1 master, 6 workers of 1 GPU each, 1
# evaluator; CifarTrainJobs, or TFJobs of the same shape) submitted at once into an empty namespace,
# one operator at a time:
# - burst: the time from the first submission until every pod exists and until every pod runs
#   (kwok's nodes run them), the operator's CPU seconds until it is idle again and its peak RSS
#   (bench-operator-scale), its API requests per job by verb (the API server's audit log, by the
#   operator's user agent), the deepest its work queue got (its metrics, every second), and its
#   reconciles' p50/p99 (cifar-operator's cifar_operator_reconcile_seconds);
# - steady state: STEADY seconds (60) with every job running: its requests a second and CPU.
# cifar-operator is the chart's (on the real node 1, every namespace); Kubeflow's runs on this
# machine for its namespace, with its default client rate limit (qps 20, burst 30) and lifted
# (1000/2000). Every job's pods are deleted between runs. RUNS picks the runs (default
# "cifar kubeflow-default kubeflow-unthrottled").
#   bench/operator_fleet.sh [build-dir] [cluster-dir] [jobs...]   (build, build/cluster-sim, 100 300 1000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-build}
cluster=$(cd "${2:-build/cluster-sim}" && pwd)
shift $(($# < 2 ? $# : 2))
counts=("$@")
((${#counts[@]})) || counts=(100 300 1000)
steady=${STEADY:-60}
kubeconfig=$cluster/kubeconfig
audit=$cluster/logs/audit.log
[ -f "$audit" ] || { echo "operator_fleet.sh: no audit log in $cluster: start it with deploy/sim-cluster/start.sh" >&2; exit 1; }
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
log_dir=$cluster/logs
# shellcheck source=deploy/local-cluster/lib.sh
source "$root/deploy/local-cluster/lib.sh"  # free_port
work=$(mktemp -d)
log=$work/operator.log
operator_pid=""
sampler_pid=""
cleanup() {
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
  [ -n "$operator_pid" ] && kill -9 "$operator_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=bench/support/kubeflow.sh
. "$here/support/kubeflow.sh"
# shellcheck source=bench/support/fleet.sh
. "$here/support/fleet.sh"
install_kubeflow

# The chart's cifar-operator: its process here (CPU, RSS) and its metrics on its pod's address.
cifar_pid=$(pgrep -o -x cifar-operator) || { echo "operator_fleet.sh: no cifar-operator runs on $cluster" >&2; exit 1; }
cifar_metrics="http://$(k -n cifartrain-system get pod -l app.kubernetes.io/name=cifar-operator \
  -o jsonpath='{.items[0].status.podIP}'):$(k -n cifartrain-system get deployment cifar-operator \
  -o jsonpath='{.spec.template.spec.containers[0].ports[?(@.name=="metrics")].containerPort}')/metrics"
curl -fs "$cifar_metrics" >/dev/null || { echo "operator_fleet.sh: cifar-operator's metrics do not answer at $cifar_metrics" >&2; exit 1; }

# sample_depth URL METRIC OUT: the metric's largest value, every second, into OUT (until killed).
sample_depth() {
  local max=0 value
  while :; do
    value=$(curl -fs --max-time 1 "$1" 2>/dev/null | awk -v m="$2" '$1 == m || index($1, m "{") == 1 {s += $2} END {print s + 0}')
    awk -v a="$value" -v b="$max" 'BEGIN {exit !(a > b)}' && max=$value && echo "$max" >"$3"
    sleep 1
  done
}
# reconcile_quantiles BEFORE AFTER: between two scrapes of cifar-operator's metrics, its
# reconciles, their p50 and p99 (the upper bound of the bucket of cifar_operator_reconcile_seconds
# they fall in) and the share within 100 ms.
reconcile_quantiles() {
  python3 - "$1" "$2" <<'PY'
import re, sys
def buckets(path):
    text = open(path).read()
    return {float(le): float(c) for le, c in
            re.findall(r'cifar_operator_reconcile_seconds_bucket\{le="([^"]+)"\} (\S+)', text)}
before, after = buckets(sys.argv[1]), buckets(sys.argv[2])
run = sorted((le, after[le] - before.get(le, 0)) for le in after)
count = run[-1][1]
q = lambda f: next(le for le, c in run if c >= f * count)
within = dict(run)[0.1] / count
print(f"reconciles={count:.0f} p50_le_s={q(0.5)} p99_le_s={q(0.99)} within_100ms={within:.4f}")
PY
}

results=$work/results.txt
for jobs in "${counts[@]}"; do
  for run in ${RUNS:-cifar kubeflow-default kubeflow-unthrottled}; do
    ns=fleet-$run-$jobs
    k create namespace "$ns" >/dev/null
    case $run in
      cifar) pid=$cifar_pid kind=cifar agent=cifar-operator metrics=$cifar_metrics depth=cifar_operator_workqueue_depth ;;
      kubeflow-*)
        [ "$run" = kubeflow-default ] && start_kubeflow "$ns" 20 30 || start_kubeflow "$ns" 1000 2000
        pid=$operator_pid kind=tfjob agent=training-operator depth=workqueue_depth
        metrics=$operator_metrics
        ;;
    esac
    curl -fs "$metrics" >"$work/metrics-before"
    offset=$(wc -l <"$audit")
    echo 0 >"$work/depth"
    sample_depth "$metrics" "$depth" "$work/depth" &
    sampler_pid=$!
    line=$("$root/$build/bin/bench-operator-scale" --kubeconfig "$kubeconfig" --namespace "$ns" \
      --kind "$kind" --jobs "$jobs" --workers 6 --worker-gpus 1 --until running \
      --timeout-minutes 30 --operator-pid "$pid") || { tail -50 "$log" >&2 || true; exit 1; }
    kill "$sampler_pid" && sampler_pid=""
    sleep 2  # the audit log is written in batches
    burst=$(audit_requests "$offset" "$agent")  # the burst: from the first submission to every pod Running
    # Steady state: every job running.
    offset=$(wc -l <"$audit")
    cpu0=$(cpu_seconds "$pid")
    sleep "$steady"
    cpu1=$(cpu_seconds "$pid")
    sleep 2
    steady_requests=$(audit_requests "$offset" "$agent")
    curl -fs "$metrics" >"$work/metrics-after"
    quantiles=$([ $kind != cifar ] || reconcile_quantiles "$work/metrics-before" "$work/metrics-after")
    echo "$run $line depth_max=$(cat "$work/depth") burst[$burst] steady_cpu_s=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN {print b - a}') steady[$steady_requests] $quantiles" | tee -a "$results" >&2
    # Every job and pod gone before the next run (kwok ends deleted pods).
    k -n "$ns" delete cifartrainjobs,tfjobs --all --wait=false >/dev/null
    k delete namespace "$ns" --timeout=10m >/dev/null
    [[ $run != kubeflow-* ]] || stop_operator
  done
done

python3 - "$results" "$steady" <<'PY'
import re, sys
names = {"cifar": "cifar-operator", "kubeflow-default": "training-operator v1.9.3 (qps 20)",
         "kubeflow-unthrottled": "training-operator v1.9.3 (qps 1000)"}
print("| operator | jobs (pods) | all pods exist s | all pods Running s | CPU s (burst) | peak RSS MiB | "
      "requests/job (by verb) | queue depth max | reconcile p50/p99 (bucket) | steady req/s | steady CPU % |")
print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
steady = float(sys.argv[2])
for line in open(sys.argv[1]):
    run = line.split()[0]
    bracketed = dict(re.findall(r"(\w+)\[([^\]]*)\]", line))
    f = dict(re.findall(r"(\w+)=([\d.]+)", re.sub(r"\w+\[[^\]]*\]", "", line)))
    burst = {v: int(n) for v, n in re.findall(r"(\w+)=(\d+)", bracketed["burst"])}
    st = {v: int(n) for v, n in re.findall(r"(\w+)=(\d+)", bracketed["steady"])}
    jobs = int(f["jobs"])
    verbs = ", ".join(f"{v} {n / jobs:.1f}" for v, n in sorted(burst.items()))
    quantiles = f"{f['p50_le_s']}/{f['p99_le_s']} s" if "p50_le_s" in f else "-"
    print(f"| {names[run]} | {jobs} ({f['pods']}) | {float(f['all_pods_s']):.1f} | "
          f"{float(f['all_running_s']):.1f} | {float(f['cpu_s']):.1f} | {float(f['peak_rss_mib']):.0f} | "
          f"{sum(burst.values()) / jobs:.1f} ({verbs}) | {f['depth_max']} | {quantiles} | "
          f"{sum(st.values()) / steady:.2f} | {100 * float(f['steady_cpu_s']) / steady:.1f} |")
PY
