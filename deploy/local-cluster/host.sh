# shellcheck shell=bash
# What the local cluster changes on the host outside DIR, in one place (sourced by start.sh and
# stop.sh; tests/local-cluster/host_test.sh runs these functions on sample input and temporary
# directories). start.sh records the host as it was (DIR/host-before, from record_host); stop.sh
# puts it back (the restore functions) and then lists what is left (what_is_left). The functions
# that read the record read $dir/host-before, as lib.sh's read $dir. record_host, the restore steps
# and the checks return 0 whatever they find (start.sh runs with -e, stop.sh without).
#
# DIR/host-before, a KEY=VALUE a line:
#   ip_forward=0|1                the sysctls node.sh turns on, as they were
#   bridge_nf_call_iptables=0|1   (empty where br_netfilter was not loaded)
#   existed=PATH                  one of host_paths that was there before the cluster (one line each)
#   mounted=/run/netns            /run/netns was a mount point before (`ip netns add` makes it one)
# A record written before this file existed also has bin= and nodes= lines, which nothing reads now.
# shellcheck disable=SC2154 # dir: the cluster directory, the caller's

# The host paths the kubelets and containerd write outside DIR: start.sh records which were there,
# stop.sh removes the others and then checks that they are gone.
host_paths=(/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd /run/netns /etc/cni)
# Where, besides under DIR, the cluster mounts (the pods' volumes and root filesystems): an ERE.
host_mount_dirs='/run/containerd|/var/lib/kubelet'
# The root of the cgroup hierarchies (v2: the one; v1: a directory per controller).
cgroup_fs=/sys/fs/cgroup

# --- the record ---------------------------------------------------------------------------------

# record_host PATH...: the host as it is now, as host-before holds it (on stdout); PATH...: the
# paths whose existence to record (start.sh: "${host_paths[@]}").
record_host() {
  local path
  echo "ip_forward=$(cat /proc/sys/net/ipv4/ip_forward)"
  echo "bridge_nf_call_iptables=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo)"
  for path in "$@"; do
    [ -e "$path" ] && echo "existed=$path"
  done
  findmnt -n /run/netns >/dev/null 2>&1 && echo "mounted=/run/netns"
  return 0
}

# recorded KEY: the record's value of KEY (empty if it has none).
recorded() { sed -n "s/^$1=//p" "$dir/host-before"; }

# existed_before PATH: whether PATH was there before the cluster.
existed_before() { grep -qx "existed=$1" "$dir/host-before"; }

# netns_mount_was_there: whether /run/netns was a mount point before the cluster.
netns_mount_was_there() { grep -qx "mounted=/run/netns" "$dir/host-before"; }

# --- restore, in stop.sh's order ----------------------------------------------------------------

# unmount_cluster_mounts: every mount under DIR, /run/containerd and /var/lib/kubelet (the pods'
# volumes and root filesystems), deepest first.
unmount_cluster_mounts() {
  findmnt -rn -o TARGET | grep -E "^($dir|$host_mount_dirs)/" | sort -r |
    while read -r target; do umount -l "$target" 2>/dev/null; done
  return 0
}

# delete_network_namespaces: the pods' network namespaces, then the nodes' (their veths and the
# host's routes to them go with them); then the /run/netns bind mount that `ip netns add` made,
# unless it was there before (the pods' namespaces mounted under it cannot go while it stays).
delete_network_namespaces() {
  local ns
  for ns in /run/netns/cni-* /run/netns/cifar-node*; do
    [ -e "$ns" ] && ip netns delete "$(basename "$ns")" 2>/dev/null
  done
  if ! netns_mount_was_there; then
    while findmnt -n /run/netns >/dev/null 2>&1; do umount -l /run/netns || break; done
    rm -f /run/netns/cni-* /run/netns/cifar-node*  # what was mounted over is a plain file now
  fi
  return 0
}

# The cluster's iptables chains: KUBE- (kube-proxy's and the kubelet's) and CIFAR- (node.sh's:
# the NetworkPolicy agent's queue).
# has_cluster_rules: whether the iptables-save text on stdin declares such a chain or jumps to one.
has_cluster_rules() { grep -qE '(^:(KUBE|CIFAR)-| -j (KUBE|CIFAR)-)'; }

# without_cluster_rules: the iptables-save text on stdin without those chains, the rules in them and
# every rule that jumps to one (on stdout): the table as iptables-restore is to make it.
without_cluster_rules() { grep -vE '(^:(KUBE|CIFAR)-|^-A (KUBE|CIFAR)-| -j (KUBE|CIFAR)-)'; }

# remove_cluster_rules: the KUBE- chains that kube-proxy --cleanup leaves (the kubelet's own:
# KUBE-FIREWALL, the canaries) and node.sh's CIFAR- chain, in the filter, nat and mangle tables of
# iptables and ip6tables:
# each table that has any saved, filtered and restored as a whole (iptables-restore replaces a
# table atomically; no line read back is run as a command).
remove_cluster_rules() {
  local tool table saved
  for tool in iptables ip6tables; do
    for table in filter nat mangle; do
      saved=$("$tool-save" -t "$table" 2>/dev/null) || continue
      has_cluster_rules <<<"$saved" || continue
      without_cluster_rules <<<"$saved" | "$tool-restore" -T "$table" 2>/dev/null ||
        echo "stop.sh: could not remove the KUBE- and CIFAR- rules of $tool table $table" >&2
    done
  done
  return 0
}

# restore_sysctls: ip_forward and bridge-nf-call-iptables as the record has them.
restore_sysctls() {
  [ -n "$(recorded ip_forward)" ] && recorded ip_forward >/proc/sys/net/ipv4/ip_forward
  [ -n "$(recorded bridge_nf_call_iptables)" ] &&
    recorded bridge_nf_call_iptables >/proc/sys/net/bridge/bridge-nf-call-iptables
  return 0
}

# kill_node_cgroup_processes CGROUP_FS: what a killed node (node.sh kill) left running in its
# cgroup root (/node2../node8: v1's pids hierarchy, or v2's), three rounds of SIGKILL: nothing may
# outlive the cluster.
kill_node_cgroup_processes() {
  local procs pids
  for procs in "$1"/pids/node[2-8] "$1"/node[2-8]; do
    [ -d "$procs" ] || continue
    for _ in 1 2 3; do
      pids=$(find "$procs" -name cgroup.procs -exec cat {} + 2>/dev/null)
      [ -n "$pids" ] || break
      # shellcheck disable=SC2086 # a pid a word
      kill -9 $pids 2>/dev/null
      sleep 0.5
    done
  done
  return 0
}

# remove_kubelet_cgroups CGROUP_FS: the kubelets' cgroups (kubepods, in every hierarchy; a v1
# hierarchy's kubepods.slice; nodes 2.. under /nodeN), deepest first, once no process is in them
# (rmdir: a cgroup with a process in it stays, and what_is_left names it).
remove_kubelet_cgroups() {
  local root
  for root in "$1"/*/kubepods "$1"/kubepods "$1"/*/kubepods.slice "$1"/*/node[2-8] "$1"/node[2-8]; do
    [ -d "$root" ] && find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  return 0
}

# remove_new_host_paths PATH...: each PATH that was not there before the cluster, whole.
remove_new_host_paths() {
  local path
  for path in "$@"; do
    existed_before "$path" || rm -rf "$path"
  done
  return 0
}

# --- what is left -------------------------------------------------------------------------------
# Each prints a line per thing of the cluster still on the machine, nothing if none.

# processes_left: processes with DIR/ in their command line.
processes_left() {
  pgrep -f -- "$dir/" >/dev/null && echo "processes: $(pgrep -a -f -- "$dir/" | cut -c1-120 | paste -sd';')"
  return 0
}

# network_left: the nodes' network namespaces, the bridge cifar0 and the nodes' veths.
network_left() {
  ip netns list 2>/dev/null | grep -q '^cifar-node' && echo "network namespaces: $(ip netns list | grep '^cifar-node' | paste -sd' ')"
  ip -o link show 2>/dev/null | grep -qE ': (cifar0|cifar-v[0-9]+)[@:]' && echo "links: cifar0 or cifar-v*"
  return 0
}

# iptables_left: a KUBE- or CIFAR- chain or rule anywhere in iptables or ip6tables.
iptables_left() {
  local tool
  for tool in iptables ip6tables; do
    "$tool-save" 2>/dev/null | grep -qE '(KUBE|CIFAR)-' && echo "$tool: KUBE- or CIFAR- chains or rules"
  done
  return 0
}

# mounts_left: a mount at or under DIR, /run/containerd or /var/lib/kubelet; the /run/netns bind
# mount, unless it was there before.
mounts_left() {
  findmnt -rn -o TARGET | grep -qE "^($dir|$host_mount_dirs)(/|$)" && echo "mounts under $dir, /run/containerd or /var/lib/kubelet"
  if ! netns_mount_was_there && findmnt -n /run/netns >/dev/null 2>&1; then
    echo "the /run/netns bind mount"
  fi
  return 0
}

# cgroups_left CGROUP_FS: the kubelets' kubepods cgroups and the nodes' cgroup roots.
cgroups_left() {
  local cgroup
  for cgroup in "$1"/*/kubepods "$1"/kubepods "$1"/*/node[2-8] "$1"/node[2-8]; do
    [ -d "$cgroup" ] && echo "cgroup $cgroup"
  done
  return 0
}

# host_paths_left PATH...: each PATH that is there now but was not before the cluster.
host_paths_left() {
  local path
  for path in "$@"; do
    existed_before "$path" || ! [ -e "$path" ] || echo "$path"
  done
  return 0
}

# sysctls_left: ip_forward, if it differs from the record, saying what it is and was.
sysctls_left() {
  local now was
  now=$(cat /proc/sys/net/ipv4/ip_forward)
  was=$(recorded ip_forward)
  [ "$now" = "$was" ] || echo "ip_forward is $now (it was $was)"
  return 0
}

# what_is_left: all of the above, a line each.
what_is_left() {
  processes_left
  network_left
  iptables_left
  mounts_left
  cgroups_left "$cgroup_fs"
  host_paths_left "${host_paths[@]}"
  sysctls_left
}
