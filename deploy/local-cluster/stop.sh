#!/usr/bin/env bash
# Stops the local cluster that start.sh started in DIR and leaves the machine as it was: the pods'
# containers, the daemons (by the pids start.sh saved, never by name), their mounts (the nodes'
# mount namespaces, which hold the pods' mounts, with them), the nodes'
# network namespaces (and the /run/netns bind mount that `ip netns add` made), iptables rules
# (kube-proxy --cleanup and every KUBE- chain), the bridge, the cgroups the kubelets made, the
# directories the kubelets and containerd write outside DIR, and the sysctls start.sh turned on.
# What the cluster changes on the host, the record of it that start.sh makes (DIR/host-before) and
# the functions that put it back and check are host.sh's. Then it checks that nothing is left.
# Safe to repeat; DIR itself stays (its logs), start.sh empties it.
#   deploy/local-cluster/stop.sh DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(cd "$1" 2>/dev/null && pwd) || exit 0
[ -f "$dir/host-before" ] || exit 0
log_dir=$dir/logs
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=host.sh
source "$here/host.sh"  # the record DIR/host-before, and the functions that restore and audit
bin=$(sed -n 's/^bin=//p' "$dir/cluster.env" 2>/dev/null)  # the cluster's binaries (kube-proxy --cleanup)
nodes=$(node_indexes)  # those whose daemons DIR/pids holds

# --- the daemons, by the pids start.sh and node.sh saved ----------------------------------------
# The kubelets first, so that nothing restarts the containers; then the containers themselves.
for i in $nodes; do stop_daemon "node$i-kubelet"; done
for sock in "$dir"/node*/containerd.sock; do
  [ -S "$sock" ] || continue
  ctr=(ctr --address "$sock" -n k8s.io)
  for task in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -s SIGKILL "$task" >/dev/null 2>&1; done
  sleep 1
  for task in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks delete -f "$task" >/dev/null 2>&1; done
  for c in $("${ctr[@]}" containers ls -q 2>/dev/null); do "${ctr[@]}" containers delete "$c" >/dev/null 2>&1; done
  # Shims of this containerd that are still there (its socket is in their command line), and what
  # a node death left of its pods (node.sh kill leaves them dead already).
  pkill -9 -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null
done
for i in $nodes; do
  stop_daemon "node$i-network-policy"
  stop_daemon "node$i-kube-proxy"
  stop_daemon "node$i-containerd"
done
for name in kwok coredns kube-scheduler kube-controller-manager kube-apiserver etcd; do
  stop_daemon "$name"
done
rm -f "$dir/pids"

# --- the host as it was (host.sh: a function each, in this order) -------------------------------
unmount_cluster_mounts
delete_network_namespaces
# kube-proxy's chains and rules, then the KUBE- chains that --cleanup leaves and node.sh's CIFAR-
[ -x "$bin/kube-proxy" ] && "$bin/kube-proxy" --cleanup >/dev/null 2>&1
remove_cluster_rules
ip link del cifar0 2>/dev/null  # node 1's bridge (the other nodes' went with their namespaces)
restore_sysctls
kill_node_cgroup_processes "$cgroup_fs"
remove_kubelet_cgroups "$cgroup_fs"
# libcni's cache of this network's results (/var/lib/cni may be another runtime's, e.g. podman's).
rm -f /var/lib/cni/results/cifar-*
remove_new_host_paths "${host_paths[@]}"
rm -rf "$dir"/node*/containerd "$dir"/node*/kubelet/root

# --- what is left, if anything: then this says what and fails (the e2e tests' last step runs this)
mapfile -t left < <(what_is_left)
if ((${#left[@]})); then
  # host-before stays: stop.sh again (or start.sh) tries again, knowing what the host had.
  printf 'stop.sh: left on the machine: %s\n' "${left[@]}" >&2
  exit 1
fi
rm -f "$dir/host-before"
echo "stop.sh: the machine is as it was before the cluster" >&2
