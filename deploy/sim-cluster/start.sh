#!/usr/bin/env bash
# A simulated GPU fleet on this machine, for measuring the operator (and Kueue) at the scale of
# hundreds of nodes: the local cluster (deploy/local-cluster/start.sh) with its one real node,
# which runs the operator (installed with the Helm chart) and, with --kueue, Kueue; plus N nodes
# that kwok (sigs.k8s.io/kwok, deploy/tools) simulates against the same API server, scheduler and
# controller manager: Node objects with 8 nvidia.com/gpu each and topology labels (nodes.sh),
# whose pods move through their phases by kwok's stages (stages.yaml): Running 1-4 s after they
# are bound, a chief with the annotation sim.cifartrain.io/run-seconds Succeeded that long after
# it started, a deleted pod Failed (143) and gone. No process of a training pod runs. The real node
# is cordoned once the operator (and Kueue) run on it, so every job's pods land on simulated nodes.
# Pods' addresses come from 10.64.0.0/12, which nothing serves: what is sent there is dropped, so
# the operator's progress scrapes of them time out, as with pods that do not answer.
#   deploy/sim-cluster/start.sh [--nodes N] [--kueue] DIR [IMAGES_DIR]
# N: 1 to 5000 (default 1000). Stop it like the local cluster: deploy/local-cluster/stop.sh DIR.
# Node faults: nodes.sh down/up.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
nodes=1000 kueue=false
while [[ "${1:-}" == --* ]]; do
  case $1 in
    --nodes) nodes=${2:-}; shift 2 ;;
    --kueue) kueue=true; shift ;;
    *) echo "start.sh: unknown option $1 (--nodes N, --kueue)" >&2; exit 2 ;;
  esac
done
if ! [[ "$nodes" =~ ^[1-9][0-9]{0,3}$ ]] || [ "$nodes" -gt 5000 ]; then
  echo "sim-cluster/start.sh: --nodes takes 1 to 5000, not '$nodes'" >&2
  exit 2
fi
[ -n "${1:-}" ] || { echo "usage: sim-cluster/start.sh [--nodes N] [--kueue] DIR [IMAGES_DIR]" >&2; exit 2; }
local_cluster=$repo/deploy/local-cluster
kwok="$("$repo/deploy/tools/build.sh" kwok)/kwok"  # before the cluster: a cold build takes minutes

# The real node, with the Kubernetes default node-monitor grace (50 s): kwok renews a node's
# 40 s Lease every 10 s (a Lease write a second for every 10 nodes; the local cluster's 20 s would
# need one every 4 s). The API server's audit log (DIR/logs/audit.log) is what bench/operator_fleet.sh
# counts each operator's requests by.
# Its closing words are about the local cluster alone: said only if it fails.
said=$(mktemp)
trap 'rm -f "$said"' EXIT
if ! "$local_cluster/start.sh" --nodes 1 --node-monitor-grace 50s --audit-log "$1" "${2:-}" >/dev/null 2>"$said"; then
  cat "$said" >&2
  exit 1
fi
dir=$(cd "$1" && pwd)
log_dir=$dir/logs
# shellcheck source=../local-cluster/lib.sh
source "$local_cluster/lib.sh"
kubectl=(kubectl --kubeconfig "$dir/kubeconfig")
log() { echo "sim-cluster/start.sh: $*" >&2; }
if $kueue; then "$local_cluster/kueue.sh" "$dir"; fi
"${kubectl[@]}" cordon "$("$local_cluster/node.sh" name "$dir" 1)" >/dev/null

# The simulated pods' addresses: dropped here, for the host's processes and node 1's pods alike
# (a CIFAR- chain: stop.sh removes it with the cluster's own).
pod_cidr=10.64.0.0/12
iptables -N CIFAR-SIM-PODS
iptables -A CIFAR-SIM-PODS -d "$pod_cidr" -j DROP
iptables -I OUTPUT -j CIFAR-SIM-PODS
iptables -I FORWARD -j CIFAR-SIM-PODS

# kwok: the nodes labelled sim.cifartrain.io/kwok=true and not nodes.sh's down label; no config
# of the user's (KWOK_WORKDIR), only the stages here.
mkdir -p "$dir/kwok"
spawn kwok env KWOK_WORKDIR="$dir/kwok" "$kwok" --kubeconfig="$dir/kubeconfig" \
  --manage-nodes-with-label-selector='sim.cifartrain.io/kwok=true,!sim.cifartrain.io/node-down' \
  --cidr="$pod_cidr" --node-lease-duration-seconds=40 --config="$here/stages.yaml" -v=WARN

started=$(date +%s)
"$here/nodes.sh" add "$dir" "$nodes"
ready() { [ "$("${kubectl[@]}" get nodes -l sim.cifartrain.io/kwok=true --no-headers | grep -c ' Ready ')" -eq "$nodes" ]; }
wait_for kwok 300 ready
log "$nodes simulated nodes Ready $(($(date +%s) - started)) s after the first was created"

echo "$dir/kubeconfig"
cat >&2 <<DONE
The simulated fleet is up: $nodes kwok nodes of 8 nvidia.com/gpu each (racks of 8, blocks of 64,
zones of 256), the operator$($kueue && echo " and Kueue") on the real node 1 (cordoned). Point kubectl at it:
  export KUBECONFIG=$dir/kubeconfig
  kubectl get nodes -L cifartrain.io/rack
A node lost: deploy/sim-cluster/nodes.sh down $dir NODE... (up: again)
Stop it and clean up: deploy/local-cluster/stop.sh $dir (or make cluster-sim-stop)
DONE
