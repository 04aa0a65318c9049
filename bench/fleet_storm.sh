#!/usr/bin/env bash
# A failure storm on the simulated fleet (deploy/sim-cluster, started before this): JOBS
# CifarTrainJobs of 9 pods (bench-operator-scale's shape: 1 PS, 1 master, 6 workers of 1 GPU, 1
# evaluator) running, then PERCENT of the nodes (the first in name order: whole racks and blocks,
# as a power or switch failure takes them) stop answering at once (nodes.sh down). Reports when the
# node controller had marked them all NotReady, when every pod that was on them ran again on a live
# node (the operator replaces a lost node's pods after runPolicy.nodeFailureGraceSeconds, 30 s by
# default), and the operator's API requests by verb (the API server's audit log) and CPU seconds
# from the failure until then. The nodes come back at the end.
#   bench/fleet_storm.sh [build-dir] [cluster-dir] [jobs] [percent]   (build, build/cluster-sim, 300, 10)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-build}
cluster=$(cd "${2:-build/cluster-sim}" && pwd)
jobs=${3:-300}
percent=${4:-10}
kubeconfig=$cluster/kubeconfig
audit=$cluster/logs/audit.log
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
# shellcheck source=bench/support/fleet.sh
. "$here/support/fleet.sh"
pid=$(pgrep -o -x cifar-operator) || { echo "fleet_storm.sh: no cifar-operator runs on $cluster" >&2; exit 1; }
ns=fleet-storm
k create namespace "$ns" >/dev/null
"$root/$build/bin/bench-operator-scale" --kubeconfig "$kubeconfig" --namespace "$ns" --kind cifar \
  --jobs "$jobs" --workers 6 --worker-gpus 1 --until running --timeout-minutes 30 \
  --operator-pid "$pid" >&2

mapfile -t all < <(k get nodes -l sim.cifartrain.io/kwok=true -o name | sed 's|^node/||' | sort)
count=$((${#all[@]} * percent / 100))
down=("${all[@]:0:count}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%s\n' "${down[@]}" >"$work/down"
k -n "$ns" get pods -o json | python3 -c '
import json, sys
down = set(open(sys.argv[1]).read().split())
print("\n".join(p["metadata"]["name"] for p in json.load(sys.stdin)["items"] if p["spec"].get("nodeName") in down))' \
  "$work/down" >"$work/affected"
echo "fleet_storm.sh: $count of ${#all[@]} nodes down, $(wc -l <"$work/affected") pods of $jobs jobs on them" >&2

offset=$(wc -l <"$audit")
cpu0=$(cpu_seconds "$pid")
start=$(date +%s.%N)
bash "$root/deploy/sim-cluster/nodes.sh" down "$cluster" "${down[@]}"
# Every 2 s: how many of the down nodes are NotReady, how many affected pods run on a live node.
python3 - "$kubeconfig" "$ns" "$work/down" "$work/affected" "$start" <<'PY'
import json, subprocess, sys, time
kubeconfig, ns, down_file, affected_file, start = sys.argv[1:6]
down, affected, start = set(open(down_file).read().split()), set(open(affected_file).read().split()), float(start)
k = ["kubectl", "--kubeconfig", kubeconfig]
all_not_ready = None
def table(*args):  # kubectl's custom columns: lighter on the API server and here than JSON
    out = subprocess.check_output(k + list(args) + ["--no-headers"], text=True)
    return [line.split() for line in out.splitlines()]
while time.time() - start < 900:
    nodes = table("get", "nodes", "-l", "sim.cifartrain.io/node-down",
                  "-o", 'custom-columns=N:.metadata.name,R:.status.conditions[?(@.type=="Ready")].status')
    not_ready = sum(1 for name, ready in nodes if name in down and ready != "True")
    pods = table("-n", ns, "get", "pods", "-o",
                 "custom-columns=N:.metadata.name,NODE:.spec.nodeName,P:.status.phase,D:.metadata.deletionTimestamp")
    back = sum(1 for name, node, phase, deleted in pods
               if name in affected and node not in down and phase == "Running" and deleted == "<none>")
    now = time.time() - start
    if all_not_ready is None and not_ready == len(down):
        all_not_ready = now
    print(f"{now:6.1f} s: {not_ready}/{len(down)} nodes NotReady, {back}/{len(affected)} pods running again", file=sys.stderr)
    if back == len(affected):
        print(f"nodes={len(down)} pods={len(affected)} all_not_ready_s={all_not_ready:.1f} all_running_again_s={now:.1f}")
        break
    time.sleep(2)
else:
    sys.exit("fleet_storm.sh: not every pod ran again within 900 s")
PY
cpu1=$(cpu_seconds "$pid")
sleep 2  # the audit log is written in batches
echo "operator requests: $(audit_requests "$offset" cifar-operator)"
echo "operator CPU from the failure until every pod ran again: $(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN {print b - a}') s"
bash "$root/deploy/sim-cluster/nodes.sh" up "$cluster" "${down[@]}"
k -n "$ns" delete cifartrainjobs --all --wait=false >/dev/null
k delete namespace "$ns" --timeout=10m >/dev/null
