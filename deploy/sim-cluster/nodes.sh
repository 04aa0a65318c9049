#!/usr/bin/env bash
# The simulated fleet's nodes (start.sh), Node objects that kwok keeps Ready:
#   nodes.sh add DIR N           N GPU nodes more (named on from those there)
#   nodes.sh down DIR NODE...    the nodes stop answering: kwok lets them go, their Leases expire
#                                and the node controller marks them NotReady (about 40-50 s with
#                                start.sh's 40 s Leases and 50 s grace), their pods left as they were
#   nodes.sh up DIR NODE...      they answer again
#   nodes.sh rack DIR RACK       the nodes of one rack (for `down`), one a line
# A node is a GPU server of 8 GPUs, 96 cores and 1 TiB, with the labels NVIDIA's GPU operator and
# a cloud's topology give: 8 nodes a rack, 8 racks a block, 4 blocks a zone (topology labels
# topology.kubernetes.io/zone, cifartrain.io/block and cifartrain.io/rack, for Kueue's
# Topology Aware Scheduling), and kubernetes.io/hostname, which a kubelet would set.
set -euo pipefail
usage="usage: nodes.sh add DIR N | down DIR NODE... | up DIR NODE... | rack DIR RACK"
action=${1:?$usage}
dir=$(cd "${2:?$usage}" && pwd)
shift 2
kubectl=(kubectl --kubeconfig "$dir/kubeconfig")
selector=sim.cifartrain.io/kwok=true
down_label=sim.cifartrain.io/node-down

case $action in
  add)
    count=${1:?$usage}
    [[ "$count" =~ ^[1-9][0-9]*$ ]] || { echo "nodes.sh: N is a number of nodes, not '$count'" >&2; exit 2; }
    first=$("${kubectl[@]}" get nodes -l "$selector" --no-headers 2>/dev/null | wc -l)
    python3 - "$first" "$count" <<'PY' | "${kubectl[@]}" create -f - >/dev/null
import json, sys

first, count = int(sys.argv[1]), int(sys.argv[2])
resources = {"cpu": "96", "memory": "1Ti", "pods": "110", "ephemeral-storage": "3Ti",
             "nvidia.com/gpu": "8"}
nodes = []
for i in range(first, first + count):
    block, rack, slot = i // 64, (i // 8) % 8, i % 8
    name = f"sim-b{block:02d}-r{rack}-n{slot}"
    nodes.append({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "sim.cifartrain.io/kwok": "true",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": f"zone-{block // 4}",
            "cifartrain.io/block": f"b{block:02d}",
            "cifartrain.io/rack": f"b{block:02d}-r{rack}",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.count": "8",
        }},
        "status": {"capacity": resources, "allocatable": resources},
    })
json.dump({"apiVersion": "v1", "kind": "List", "items": nodes}, sys.stdout)
PY
    ;;
  down)
    (($#)) || { echo "$usage" >&2; exit 2; }
    "${kubectl[@]}" label node --overwrite "$@" "$down_label=true" >/dev/null
    ;;
  up)
    (($#)) || { echo "$usage" >&2; exit 2; }
    "${kubectl[@]}" label node "$@" "$down_label-" >/dev/null
    ;;
  rack)
    "${kubectl[@]}" get nodes -l "cifartrain.io/rack=${1:?$usage}" -o name | sed 's|^node/||'
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
