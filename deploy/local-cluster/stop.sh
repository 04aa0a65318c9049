#!/usr/bin/env bash
# Stops the local cluster that start.sh started in DIR and leaves the machine as it was: the pods'
# containers, the daemons (by the pids start.sh saved, never by name), their mounts, the nodes'
# network namespaces (and the /run/netns bind mount that `ip netns add` made), iptables rules
# (kube-proxy --cleanup and every KUBE- chain), the bridge, the cgroups the kubelets made, the
# directories the kubelets and containerd write outside DIR, and the sysctls start.sh turned on.
# Safe to repeat; DIR itself stays (its logs), start.sh empties it.
#   deploy/local-cluster/stop.sh DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(cd "$1" 2>/dev/null && pwd) || exit 0
[ -f "$dir/host-before" ] || exit 0
log_dir=$dir/logs
# shellcheck source=lib.sh
source "$here/lib.sh"
value() { sed -n "s/^$1=//p" "$dir/host-before"; }
nodes=$(value nodes)

# The kubelets first, so that nothing restarts the containers; then the containers themselves.
for i in $(seq "${nodes:-1}"); do stop_daemon "node$i-kubelet"; done
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
for i in $(seq "${nodes:-1}"); do
  stop_daemon "node$i-kube-proxy"
  stop_daemon "node$i-containerd"
done
for name in coredns kube-scheduler kube-controller-manager kube-apiserver etcd; do
  stop_daemon "$name"
done
rm -f "$dir/pids"

# Mounts: the pods' volumes and rootfs under DIR and /run/containerd; the pods' network namespaces,
# then the nodes' (their veths and the host's routes to them go with them).
findmnt -rn -o TARGET | grep -E "^($dir|/run/containerd|/var/lib/kubelet)/" | sort -r |
  while read -r target; do umount -l "$target" 2>/dev/null; done
for ns in /run/netns/cni-* /run/netns/cifar-node*; do
  [ -e "$ns" ] && ip netns delete "$(basename "$ns")" 2>/dev/null
done
if ! grep -qx "mounted=/run/netns" "$dir/host-before"; then
  while findmnt -n /run/netns >/dev/null 2>&1; do umount -l /run/netns || break; done
  rm -f /run/netns/cni-* /run/netns/cifar-node*  # what was mounted over is a plain file now
fi

# Network: kube-proxy's chains, the bridge, the sysctls as they were.
[ -x "$(value bin)/kube-proxy" ] && "$(value bin)/kube-proxy" --cleanup >/dev/null 2>&1
# The kubelet's own chains (KUBE-FIREWALL, the canaries), which --cleanup leaves: each table
# saved, without its KUBE- chains and every rule that is in one or jumps to one, and restored as
# a whole (iptables-restore replaces a table atomically; nothing is read back as a command).
for tool in iptables ip6tables; do
  for table in filter nat mangle; do
    saved=$("$tool-save" -t "$table" 2>/dev/null) || continue
    grep -qE '(^:KUBE-| -j KUBE-)' <<<"$saved" || continue
    grep -vE '(^:KUBE-|^-A KUBE-| -j KUBE-)' <<<"$saved" | "$tool-restore" -T "$table" 2>/dev/null ||
      echo "stop.sh: could not remove the KUBE- rules of $tool table $table" >&2
  done
done
ip link del cifar0 2>/dev/null
[ -n "$(value ip_forward)" ] && echo "$(value ip_forward)" >/proc/sys/net/ipv4/ip_forward
[ -n "$(value bridge_nf_call_iptables)" ] &&
  echo "$(value bridge_nf_call_iptables)" >/proc/sys/net/bridge/bridge-nf-call-iptables

# What a killed node (node.sh kill) left running in its cgroup root: nothing may outlive the cluster.
for procs in /sys/fs/cgroup/pids/node[2-8] /sys/fs/cgroup/node[2-8]; do
  [ -d "$procs" ] || continue
  for _ in 1 2 3; do
    pids=$(find "$procs" -name cgroup.procs -exec cat {} + 2>/dev/null)
    [ -n "$pids" ] || break
    kill -9 $pids 2>/dev/null
    sleep 0.5
  done
done
# The kubelets' cgroups (kubepods, in every hierarchy; nodes 2.. under /nodeN), deepest first, once
# no process is in them.
for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods.slice \
  /sys/fs/cgroup/*/node[2-8] /sys/fs/cgroup/node[2-8]; do
  [ -d "$root" ] && find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null
done

# libcni's cache of this network's results (/var/lib/cni may be another runtime's, e.g. podman's).
rm -f /var/lib/cni/results/cifar-*
# What the kubelet and containerd wrote outside DIR, where it was not there before.
for path in /var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd /run/netns /etc/cni; do
  grep -qx "existed=$path" "$dir/host-before" || rm -rf "$path"
done
rm -rf "$dir"/node*/containerd "$dir"/node*/kubelet/root

# What is left, if anything: then this says what and fails (the e2e tests' last step runs this).
left=()
pgrep -f -- "$dir/" >/dev/null && left+=("processes: $(pgrep -a -f -- "$dir/" | cut -c1-120 | paste -sd';')")
ip netns list 2>/dev/null | grep -q '^cifar-node' && left+=("network namespaces: $(ip netns list | grep '^cifar-node' | paste -sd' ')")
ip -o link show 2>/dev/null | grep -qE ': (cifar0|cifar-v[0-9]+)[@:]' && left+=("links: cifar0 or cifar-v*")
for tool in iptables ip6tables; do
  "$tool-save" 2>/dev/null | grep -q 'KUBE-' && left+=("$tool: KUBE- chains or rules")
done
findmnt -rn -o TARGET | grep -qE "^($dir|/run/containerd|/var/lib/kubelet)(/|$)" && left+=("mounts under $dir, /run/containerd or /var/lib/kubelet")
if ! grep -qx "mounted=/run/netns" "$dir/host-before" && findmnt -n /run/netns >/dev/null 2>&1; then
  left+=("the /run/netns bind mount")
fi
for cgroup in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/node[2-8] /sys/fs/cgroup/node[2-8]; do
  [ -d "$cgroup" ] && left+=("cgroup $cgroup")
done
for path in /var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd /run/netns /etc/cni; do
  grep -qx "existed=$path" "$dir/host-before" || ! [ -e "$path" ] || left+=("$path")
done
[ "$(cat /proc/sys/net/ipv4/ip_forward)" = "$(value ip_forward)" ] || left+=("ip_forward is on")
if ((${#left[@]})); then
  # host-before stays: stop.sh again (or start.sh) tries again, knowing what the host had.
  printf 'stop.sh: left on the machine: %s\n' "${left[@]}" >&2
  exit 1
fi
rm -f "$dir/host-before"
echo "stop.sh: the machine is as it was before the cluster" >&2
