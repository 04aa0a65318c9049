#!/usr/bin/env bash
# Stops the cluster that start.sh started in DIR and leaves the machine as it was: the pods'
# containers, the daemons (by the pids start.sh saved, never by name), their mounts, network
# namespaces, iptables rules (kube-proxy --cleanup), the bridge, the cgroups the kubelet made, the
# directories the kubelet and containerd write outside DIR, and the sysctls start.sh turned on.
# Safe to repeat; DIR itself stays (its logs), start.sh empties it.
#   tests/e2e/cluster/stop.sh DIR
set -uo pipefail
dir=$(cd "$1" 2>/dev/null && pwd) || exit 0
[ -f "$dir/host-before" ] || exit 0
pid_of() { awk -v n="$1" '$2 == n {print $1}' "$dir/pids" 2>/dev/null; }
stop_daemon() {  # name: SIGTERM, up to 10 s, then SIGKILL
  local pid
  pid=$(pid_of "$1")
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null
}

# The kubelet first, so that nothing restarts the containers; then the containers themselves.
stop_daemon kubelet
if [ -S "$dir/containerd.sock" ]; then
  ctr=(ctr --address "$dir/containerd.sock" -n k8s.io)
  for task in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -s SIGKILL "$task" >/dev/null 2>&1; done
  sleep 1
  for task in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks delete -f "$task" >/dev/null 2>&1; done
  for c in $("${ctr[@]}" containers ls -q 2>/dev/null); do "${ctr[@]}" containers delete "$c" >/dev/null 2>&1; done
fi
# Shims of this containerd that are still there (its socket is in their command line).
pkill -9 -f "containerd-shim-runc-v2 .*-address $dir/containerd.sock" 2>/dev/null
for name in kube-proxy coredns kube-scheduler kube-controller-manager containerd kube-apiserver etcd; do
  stop_daemon "$name"
done
rm -f "$dir/pids"

# Mounts: the pods' volumes and rootfs under DIR and /run/containerd; the pods' network namespaces.
findmnt -rn -o TARGET | grep -E "^($dir|/run/containerd|/var/lib/kubelet)/" | sort -r |
  while read -r target; do umount -l "$target" 2>/dev/null; done
for ns in /var/run/netns/cni-*; do
  [ -e "$ns" ] && ip netns delete "$(basename "$ns")" 2>/dev/null
done

# Network: kube-proxy's chains, the bridge, the sysctls as they were.
value() { sed -n "s/^$1=//p" "$dir/host-before"; }
[ -x "$(value bin)/kube-proxy" ] && "$(value bin)/kube-proxy" --cleanup >/dev/null 2>&1
# The kubelet's own chains (KUBE-FIREWALL, the canaries), which --cleanup leaves: every rule that
# jumps to a KUBE- chain, then the chains. start.sh refuses to start where KUBE- chains exist.
for tool in iptables ip6tables; do
  for table in filter nat mangle; do
    "$tool" -t "$table" -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j KUBE-' | sed 's/^-A/-D/' |
      while read -r rule; do eval "$tool -t $table $rule" 2>/dev/null; done
    for chain in $("$tool" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
      "$tool" -t "$table" -F "$chain" 2>/dev/null
    done
    for chain in $("$tool" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
      "$tool" -t "$table" -X "$chain" 2>/dev/null
    done
  done
done
ip link del cifar0 2>/dev/null
[ -n "$(value ip_forward)" ] && echo "$(value ip_forward)" >/proc/sys/net/ipv4/ip_forward
[ -n "$(value bridge_nf_call_iptables)" ] &&
  echo "$(value bridge_nf_call_iptables)" >/proc/sys/net/bridge/bridge-nf-call-iptables

# The kubelet's cgroups (kubepods, in every hierarchy), deepest first, once no process is in them.
for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods.slice; do
  [ -d "$root" ] && find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null
done

# libcni's cache of this network's results (/var/lib/cni may be another runtime's, e.g. podman's).
rm -f /var/lib/cni/results/cifar-*
# What the kubelet and containerd wrote outside DIR, where it was not there before.
for path in /var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd /var/run/netns /etc/cni; do
  grep -qx "existed=$path" "$dir/host-before" || rm -rf "$path"
done
rm -rf "$dir/containerd" "$dir/kubelet/root"
rm -f "$dir/host-before"
