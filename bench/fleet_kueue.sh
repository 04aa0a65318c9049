#!/usr/bin/env bash
# Kueue on the simulated fleet (deploy/sim-cluster started with --kueue, before this): a
# ClusterQueue whose nvidia.com/gpu quota is QUOTA percent of the fleet's GPUs (25), and JOBS
# CifarTrainJobs of 9 pods (bench-operator-scale's shape: 1 PS, 1 master, 6 workers of 1 GPU, 1
# evaluator) submitted at once into its LocalQueue, each of which trains RUN seconds (kwok ends
# its chief then) and so gives its quota back to the next. Every 3 s: the workloads admitted so
# far, the jobs that succeeded, the GPUs held by pods on nodes, and jobs split in two (some pods
# placed while others of the same job wait at a scheduling gate for longer than one sample).
# Reports the admission throughput, the time until every job succeeded, and whether all-or-
# nothing held: never more GPUs on nodes than the quota, and no job split.
#   bench/fleet_kueue.sh [build-dir] [cluster-dir] [jobs] [quota-percent] [run-seconds]
#   (build, build/cluster-sim, 1000, 25, 60)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-build}
cluster=$(cd "${2:-build/cluster-sim}" && pwd)
jobs=${3:-1000}
quota_percent=${4:-25}
run_seconds=${5:-60}
kubeconfig=$cluster/kubeconfig
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
# shellcheck source=bench/support/fleet.sh
. "$here/support/fleet.sh"
k get crd clusterqueues.kueue.x-k8s.io >/dev/null 2>&1 ||
  { echo "fleet_kueue.sh: no Kueue on $cluster: start it with deploy/sim-cluster/start.sh --kueue" >&2; exit 1; }
pgrep -o -x cifar-operator >/dev/null || { echo "fleet_kueue.sh: no cifar-operator runs on $cluster" >&2; exit 1; }

gpus=$(($(k get nodes -l sim.cifartrain.io/kwok=true --no-headers | wc -l) * 8))
quota=$((gpus * quota_percent / 100))
ns=fleet-kueue
k create namespace "$ns" >/dev/null
kueue_queue "$ns" fleet "$ns" "$quota" | k apply -f - >/dev/null
kueue_queue_ready "$ns"
echo "fleet_kueue.sh: $jobs jobs of 6 GPUs into a quota of $quota of the fleet's $gpus GPUs, $run_seconds s each" >&2

start=$(date +%s.%N)
"$root/$build/bin/bench-operator-scale" --kubeconfig "$kubeconfig" --namespace "$ns" --kind cifar \
  --jobs "$jobs" --workers 6 --worker-gpus 1 --run-seconds "$run_seconds" --queue fleet --submit-only >&2
python3 - "$kubeconfig" "$ns" "$jobs" "$quota" "$start" <<'PY'
import collections, subprocess, sys, time
kubeconfig, ns, jobs, quota, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
k = ["kubectl", "--kubeconfig", kubeconfig, "-n", ns]
def table(*args):  # kubectl's custom columns: lighter on the API server and here than JSON
    out = subprocess.check_output(k + list(args) + ["--no-headers"], text=True)
    return [line.split() for line in out.splitlines()]
admitted_at = {}          # workload -> first seen admitted (s)
split_since = {}          # job -> first sample it was seen split
most_gpus, longest_split, samples = 0, 0.0, 0
while time.time() - start < 3600:
    now = time.time() - start
    for name, admitted in table("get", "workloads", "-o",
                                'custom-columns=N:.metadata.name,A:.status.conditions[?(@.type=="Admitted")].status'):
        if admitted == "True":
            admitted_at.setdefault(name, now)
    pods = table("get", "pods", "-o",
                 "custom-columns=J:.metadata.labels.cifartrain\\.io/job-name,NODE:.spec.nodeName,"
                 "GATES:.spec.schedulingGates[*].name,P:.status.phase,G:.spec.containers[0].resources.limits.nvidia\\.com/gpu")
    placed, gated, gpus_on_nodes = collections.Counter(), collections.Counter(), 0
    for job, node, gates, phase, gpu in pods:
        if node != "<none>" and phase in ("Pending", "Running"):
            placed[job] += 1
            gpus_on_nodes += int(gpu) if gpu != "<none>" else 0
        if gates != "<none>":
            gated[job] += 1
    split = {job for job in placed if gated[job] > 0}
    for job in split:
        split_since.setdefault(job, now)
    for job in list(split_since):
        if job not in split:
            longest_split = max(longest_split, now - split_since.pop(job))
    states = collections.Counter(s for (s,) in table("get", "cifartrainjobs", "-o", "custom-columns=S:.status.state"))
    most_gpus = max(most_gpus, gpus_on_nodes)
    samples += 1
    print(f"{now:6.1f} s: {len(admitted_at)} admitted, {states['Succeeded']} succeeded, "
          f"{gpus_on_nodes}/{quota} GPUs on nodes, {len(split)} jobs split", file=sys.stderr)
    if states["Succeeded"] == jobs:
        break
    time.sleep(3)
else:
    sys.exit("fleet_kueue.sh: not every job succeeded within an hour")
times = sorted(admitted_at.values())
first_wave = times[min(len(times), quota // 6) - 1] - times[0]
print(f"jobs={jobs} quota_gpus={quota} all_succeeded_s={now:.1f} admitted={len(times)} "
      f"admissions_per_min={60 * (len(times) - 1) / (times[-1] - times[0]):.1f} "
      f"first_wave_admitted_in_s={first_wave:.1f} most_gpus_on_nodes={most_gpus} "
      f"longest_split_s={longest_split:.1f} samples={samples}")
if most_gpus > quota:
    sys.exit(f"fleet_kueue.sh: {most_gpus} GPUs on nodes, over the quota of {quota}")
PY
