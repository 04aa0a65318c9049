#!/usr/bin/env bash
# Kueue's Topology Aware Scheduling on the simulated fleet (deploy/sim-cluster started with
# --kueue, before this): a Topology of the fleet's blocks, racks and hosts; JOBS all-reduce
# CifarTrainJobs of WORKERS workers with GPUS GPUs each in a queue without it ("spread-N"), then as
# many in a queue whose ResourceFlavor has it, with runPolicy.schedulingPolicy.topology
# {MODE: LEVEL} ("placed-N"). Once every pod runs: how many domains of LEVEL (racks) and nodes each
# job's pods landed on. With a required topology every placed job must be in one rack (exit 1
# otherwise); the spread jobs show the count can tell them apart (the operator spreads a job's pods
# over nodes). Leaves the fleet as it found it (namespace, queues, flavors and Topology deleted).
#   bench/fleet_topology.sh [build-dir] [cluster-dir] [jobs] [required|preferred] [level] [workers] [gpus]
#   (build, build/cluster-sim, 50, required, cifartrain.io/rack, 8, 4; build-dir is not read: the
#   argument stands first, as in the other fleet scripts)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster=$(cd "${2:-build/cluster-sim}" && pwd)
jobs=${3:-50}
mode=${4:-required}
level=${5:-cifartrain.io/rack}
workers=${6:-8}
gpus_per_worker=${7:-4}
kubeconfig=$cluster/kubeconfig
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
# shellcheck source=bench/support/fleet.sh
. "$here/support/fleet.sh"
k get crd topologies.kueue.x-k8s.io >/dev/null 2>&1 ||
  { echo "fleet_topology.sh: no Kueue on $cluster: start it with deploy/sim-cluster/start.sh --kueue" >&2; exit 1; }
[[ "$mode" =~ ^(required|preferred)$ ]] || { echo "fleet_topology.sh: required or preferred, not '$mode'" >&2; exit 2; }

ns=fleet-topology
# A previous run's namespace may still be going (its 800 pods take a minute or two).
k wait --for=delete "namespace/$ns" --timeout=300s >/dev/null 2>&1 || true
# Two queues over the same nodes: "placed" through a ResourceFlavor with the Topology (Kueue
# places its groups), "spread" through one without (a ClusterQueue whose flavor has a Topology
# places every group it admits, asked or not, so the jobs to compare with need a flavor of their
# own; Kueue counts their pods as the nodes' non-TAS usage).
cleanup() {
  k delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  for queue in placed spread; do
    k delete clusterqueue "$ns-$queue" >/dev/null 2>&1 || true
    k delete resourceflavor "$ns-$queue" >/dev/null 2>&1 || true
  done
  k delete topology "$ns" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
gpus=$(($(k get nodes -l sim.cifartrain.io/kwok=true --no-headers | wc -l) * 8))
k create namespace "$ns" >/dev/null
{
  cat <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: $ns}
spec:
  levels:
  - nodeLabel: cifartrain.io/block
  - nodeLabel: cifartrain.io/rack
  - nodeLabel: kubernetes.io/hostname
EOF
  kueue_queue "$ns-placed" placed "$ns" "$gpus" "{nodeLabels: {sim.cifartrain.io/kwok: \"true\"}, topologyName: $ns}"
  kueue_queue "$ns-spread" spread "$ns" "$gpus" "{nodeLabels: {sim.cifartrain.io/kwok: \"true\"}}"
} | k apply -f - >/dev/null
kueue_queue_ready "$ns-placed"
kueue_queue_ready "$ns-spread"

# The jobs, "spread-N" without the topology request first, "placed-N" with it once they all run:
# Kueue's TAS counts another queue's pods on a node once they are bound, so groups admitted while
# the scheduler is still binding the others' pods can be placed on GPUs those take (tried: 2 of
# 50 placed jobs waited Unschedulable until their startup deadline). One after the other, the
# placed jobs meet a fleet already fragmented by the others, as on a busy cluster.
submit() {  # KIND
  python3 - "$1" "$jobs" "$mode" "$level" "$workers" "$gpus_per_worker" <<'PY' | k -n "$ns" apply -f - >/dev/null
import json, sys
kind, jobs, mode, level, workers, gpus = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
def job(name):
    scheduling = {"queue": kind}
    if kind == "placed":
        scheduling["topology"] = {mode: level}
    return {"apiVersion": "cifartrain.io/v1alpha1", "kind": "CifarTrainJob", "metadata": {"name": name},
            "spec": {"image": "cifar-train:bench", "model": {"name": "resnet20"}, "dataset": {"name": "synthetic"},
                     "strategy": {"type": "AllReduce", "allReduce": {"backend": "nccl"}},
                     "replicaSpecs": {"Worker": {"replicas": workers,
                                                 "resources": {"limits": {"nvidia.com/gpu": gpus}}}},
                     "runPolicy": {"schedulingPolicy": scheduling}}}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [job(f"{kind}-{i}") for i in range(jobs)]}))
PY
}
# Until every pod of KIND's jobs runs (or WAIT_SECONDS, 900); then, with "report", where each job's pods are.
wait_running() {  # KIND [report]
  python3 - "$kubeconfig" "$ns" "$1" "$((jobs * workers))" "$(date +%s)" "${WAIT_SECONDS:-900}" "$mode" "$level" "${2:-}" <<'PY'
import collections, json, subprocess, sys, time
kubeconfig, ns, kind = sys.argv[1:4]
want, start, wait = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
mode, level, report = sys.argv[7:]
timed_out = ""
k = ["kubectl", "--kubeconfig", kubeconfig]
while True:
    pods = json.loads(subprocess.check_output(k + ["-n", ns, "get", "pods", "-o", "json"]))["items"]
    running = sum(1 for p in pods if p["status"].get("phase") == "Running" and
                  p["metadata"]["labels"]["cifartrain.io/job-name"].startswith(kind + "-"))
    if running == want:
        print(f"{kind}: {want} pods running {time.time() - start:.1f} s after the jobs were submitted")
        break
    if time.time() - start > wait:
        # Why not: the jobs' states and one job's message (Kueue's, for a queued one).
        jobs = [j for j in json.loads(subprocess.check_output(k + ["-n", ns, "get", "ctj", "-o", "json"]))["items"]
                if j["metadata"]["name"].startswith(kind + "-")]
        states = collections.Counter((j.get("status", {}).get("state", "?"), j.get("status", {}).get("reason", ""))
                                     for j in jobs)
        print(f"{kind}: jobs by state: " + ", ".join(f"{s} {r}: {c}" for (s, r), c in sorted(states.items())))
        waiting = [j for j in jobs if j.get("status", {}).get("state") != "Running"]
        if waiting:
            print(f"{waiting[0]['metadata']['name']}: {waiting[0].get('status', {}).get('message', '')}")
        timed_out = f"fleet_topology.sh: {running} of the {want} pods of the {kind} jobs run after {wait} s"
        break
    time.sleep(2)
if timed_out and not report:
    sys.exit(timed_out)
if not report:
    sys.exit()
domain = {n["metadata"]["name"]: n["metadata"]["labels"].get(level)
          for n in json.loads(subprocess.check_output(k + ["get", "nodes", "-o", "json"]))["items"]}
domains, hosts = collections.defaultdict(set), collections.defaultdict(set)
for p in pods:
    if p["status"].get("phase") != "Running":
        continue
    job, node = p["metadata"]["labels"]["cifartrain.io/job-name"], p["spec"]["nodeName"]
    domains[job].add(domain[node])
    hosts[job].add(node)
for kind in ("spread", "placed"):
    jobs = [j for j in domains if j.startswith(kind + "-")]
    if not jobs:
        continue
    spans = collections.Counter(len(domains[j]) for j in jobs)
    print(f"{kind}: jobs by how many {level} domains they span: " +
          ", ".join(f"{n}: {c}" for n, c in sorted(spans.items())) +
          f"; nodes a job's pods are on: {min(len(hosts[j]) for j in jobs)}-{max(len(hosts[j]) for j in jobs)}")
split = sorted(j for j in domains if j.startswith("placed-") and len(domains[j]) > 1)
if mode == "required" and split:
    sys.exit(f"fleet_topology.sh: required {level}, but {', '.join(split)} span more than one domain")
sys.exit(timed_out or None)
PY
}
echo "fleet_topology.sh: $jobs all-reduce jobs of $workers workers x $gpus_per_worker GPUs without a topology, then $jobs with topology $mode $level, each in a queue of $gpus GPUs" >&2
submit spread
wait_running spread
submit placed
wait_running placed report
