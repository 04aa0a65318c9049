#!/usr/bin/env bash
# One node of the local cluster that start.sh started in DIR: its containerd (+ runc and the CNI
# bridge plugin), kubelet, kube-proxy and NetworkPolicy agent (kube-network-policies).
#   node.sh network DIR INDEX   its network (start.sh, before the control plane binds node 1's)
#   node.sh start DIR INDEX     its daemons; again after `kill`, the node comes back as it was
#   node.sh kill DIR INDEX      a node death: its network cut, then SIGKILL to its daemons, their
#                               shims and every process of its pods, nothing cleaned up (as a
#                               machine that loses power); the control plane finds out by itself
#   node.sh partition DIR INDEX a network partition: the node's link cut, nothing stopped (its
#                               kubelet and pods run on, among themselves, unseen by the control
#                               plane, and keep writing to what they share with other nodes)
#   node.sh heal DIR INDEX      the partition's end: the link back, and the route to its pods
#   node.sh import DIR INDEX TAR  an image (docker-archive) into its containerd: one loaded after
#                               the node started (kueue.sh); its images survive a kill
#   node.sh name DIR INDEX      its node name
#
# Node 1 is the machine itself: the pods' bridge cifar0 (10.244.0.1/24) in the host's network
# namespace, whose address the API server and CoreDNS listen on. Node INDEX >= 2 is a machine of
# its own as far as Kubernetes can tell: a network namespace cifar-nodeINDEX, joined to the host
# by a veth pair (host 10.250.INDEX.1/30, node 10.250.INDEX.2/30, its node IP) and routed (the
# host routes its pod CIDR 10.244.INDEX-1.0/24 to it; it routes everything else to the host), with
# its own iptables (its kube-proxy's), its own containerd (root, state, socket), kubelet root, pod
# log dir and cgroup root /nodeINDEX, so that no two kubelets ever touch each other's state.
# Every node (node 1 too) also has a mount namespace of its own (DIR/nodeINDEX/mounts), in which
# its daemons and pods run: there /var/lib/kubelet/device-plugins, a constant of the kubelet's
# device plugin API, is the node's own DIR/nodeINDEX/device-plugins (its kubelet's socket and
# checkpoint, its device plugins' sockets), and the mounts its kubelet and containerd make (pod
# volumes, container filesystems, the pods' network namespaces) stay out of the host's and the
# other nodes' sight, as on machines of their own. Shared with the host, because no setting moves
# it: /var/log/containers (its links are named after pod and container ids).
# A GPU node (INDEX >= 2 when start.sh got --gpus N) has the labels NVIDIA's GPU operator puts on
# a GPU node, the fake GPUs' image (its device plugin, a DaemonSet on those labels, advertises N
# nvidia.com/gpu through the kubelet's device plugin API: start.sh), the containerd handler
# `nvidia` (plain runc: there is no GPU to inject) behind the RuntimeClass of the same name, and
# with --gpu-taint the taint nvidia.com/gpu:NoSchedule.
# NetworkPolicies are enforced per node on the traffic into its own pods: an iptables rule queues
# every new connection out of the node's bridge (routed in, or bridged between its pods) to the
# node's agent, which accepts or drops it as the policies of its two ends say. No agent, no
# connection (no --queue-bypass): a node whose agent died fails closed, as kube-network-policies does.
# shellcheck disable=SC2154 # bin, images, cluster_dns, ..., gpus, gpu_taint: cluster.env's
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command=$1
dir=$(cd "$2" && pwd)
index=$3
# shellcheck source=/dev/null
source "$dir/cluster.env"  # bin, images, cluster_dns, cluster_cidr, pause_image, network_policy_agent,
                           # gpus, gpu_taint
log_dir=$dir/logs
# shellcheck source=lib.sh
source "$here/lib.sh"

host=$(hostname | tr '[:upper:]' '[:lower:]')
node_dir=$dir/node$index
pod_cidr=10.244.$((index - 1)).0/24
bridge_ip=10.244.$((index - 1)).1
mounts=$node_dir/mounts  # its mount namespace, kept by a bind mount of it there
if [ "$index" -eq 1 ]; then
  name=$host netns="" node_ip=$bridge_ip cgroup_root=/
  in_node=()
  on_node=(nsenter "--mount=$mounts" --)
else
  name=$host-node$index netns=cifar-node$index node_ip=10.250.$index.2 cgroup_root=/node$index
  in_node=(nsenter "--net=/var/run/netns/$netns" --)  # its network (the commands that set it up)
  on_node=(nsenter "--mount=$mounts" "--net=/var/run/netns/$netns" --)  # its daemons
fi
node_gpus=0
[ "$index" -ge 2 ] && node_gpus=${gpus:-0}
sock=$node_dir/containerd.sock
ctr=(ctr --address "$sock" -n k8s.io)
network_policy_queue=100  # the NFQUEUE of the node's agent (one per network namespace)

# Host workarounds, each a named setting (these VMs are not what the kubelet and containerd expect).
# - No CAP_SYS_RESOURCE: containerd's negative oom_score_adj for sandboxes fails every pod start
#   ("can't get final child's PID from pipe"), and so would the kubelet's own -999.
restrict_oom_score_adj=true
kubelet_oom_score_adj=0
# - cgroup v1 (kubelet 1.35+ refuses it unless told) and no systemd to own the cgroups.
fail_cgroup_v1=false
cgroup_driver=cgroupfs
# - Swap may be on; a test node tolerates it.
fail_swap_on=false

node_network() {
  mkdir -p "$node_dir"/{cni/net.d,cni/ipam,kubelet,pod-logs,pki}
  if [ -z "$netns" ]; then
    ip link add cifar0 type bridge
    ip addr add "$bridge_ip/24" dev cifar0
    ip link set cifar0 up
    echo 1 >/proc/sys/net/ipv4/ip_forward
    # kube-proxy's Service rules must see the traffic between pods on the same bridge
    echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
    return
  fi
  # `ip netns add` makes /run/netns a bind mount of its own (stop.sh undoes it: the pods' network
  # namespaces mounted there afterwards cannot be removed while it stays).
  ip netns add "$netns"
  ip link add "cifar-v$index" type veth peer name eth0 netns "$netns"
  ip addr add "10.250.$index.1/30" dev "cifar-v$index"
  ip link set "cifar-v$index" up
  ip route add "$pod_cidr" via "$node_ip"
  "${in_node[@]}" ip link set lo up
  "${in_node[@]}" ip addr add "$node_ip/30" dev eth0
  "${in_node[@]}" ip link set eth0 up
  "${in_node[@]}" ip route add default via "10.250.$index.1"
  "${in_node[@]}" ip link add cifar0 type bridge
  "${in_node[@]}" ip addr add "$bridge_ip/24" dev cifar0
  "${in_node[@]}" ip link set cifar0 up
  "${in_node[@]}" sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward
    echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables'
  # Its cgroup root, in every hierarchy (cgroup v1) or the one (v2), before its kubelet starts:
  # two kubelets on one cgroup root would each kill the other's pods as strays.
  local hierarchy hierarchies=(/sys/fs/cgroup)
  [ -f /sys/fs/cgroup/cgroup.controllers ] || hierarchies=(/sys/fs/cgroup/*)  # v1: one each
  for hierarchy in "${hierarchies[@]}"; do
    [ -f "$hierarchy/cgroup.procs" ] && ! [ -L "$hierarchy" ] || continue
    mkdir -p "$hierarchy$cgroup_root"
    if [ -f "$hierarchy/cpuset.cpus" ]; then  # a v1 cpuset takes tasks only once it has both
      cat "$hierarchy/cpuset.cpus" >"$hierarchy$cgroup_root/cpuset.cpus"
      cat "$hierarchy/cpuset.mems" >"$hierarchy$cgroup_root/cpuset.mems"
    fi
  done
}

# runc_handler NAME: the containerd config of a runtime handler NAME that runs this node's runc.
runc_handler() {
  cat <<TOML
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$1]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$1.options]
        SystemdCgroup = false
        # runc's state of this node's containers, not /run/containerd/runc (every node's default)
        Root = "$node_dir/runc"
TOML
}

node_configure() {
  # The kubelet's serving certificate, for its node IP (the API server's logs and exec).
  (
    cd "$node_dir/pki"
    openssl req -newkey rsa:2048 -nodes -keyout kubelet.key -out kubelet.csr -subj "/CN=$name"
    printf 'subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\n' "$node_ip" "$name" >kubelet.ext
    openssl x509 -req -in kubelet.csr -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" \
      -CAcreateserial -days 30 -extfile kubelet.ext -out kubelet.crt
  ) >>"$log_dir/pki.log" 2>&1
  cat >"$node_dir/cni/net.d/10-cifar.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "cifar",
  "plugins": [
    {"type": "bridge", "bridge": "cifar0", "isGateway": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$node_dir/cni/ipam",
              "ranges": [[{"subnet": "$pod_cidr", "gateway": "$bridge_ip"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}}
  ]
}
CNI
  cat >"$node_dir/containerd.toml" <<TOML
version = 2
root = "$node_dir/containerd/root"
state = "$node_dir/containerd/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  restrict_oom_score_adj = $restrict_oom_score_adj
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node_dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
TOML
  runc_handler runc >>"$node_dir/containerd.toml"
  # The handler of RuntimeClass nvidia. On a real GPU node it runs runc through
  # nvidia-container-runtime, which injects the devices in NVIDIA_VISIBLE_DEVICES; here there is
  # nothing to inject, and it is runc itself.
  [ "$node_gpus" -eq 0 ] || runc_handler nvidia >>"$node_dir/containerd.toml"
  cat >"$node_dir/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $(free_port)
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: AlwaysAllow}
tlsCertFile: $node_dir/pki/kubelet.crt
tlsPrivateKeyFile: $node_dir/pki/kubelet.key
clusterDomain: cluster.local
clusterDNS: [$cluster_dns]
resolvConf: /etc/resolv.conf
cgroupRoot: $cgroup_root
failCgroupV1: $fail_cgroup_v1
cgroupDriver: $cgroup_driver
failSwapOn: $fail_swap_on
oomScoreAdj: $kubelet_oom_score_adj
containerRuntimeEndpoint: unix://$sock
podLogsDir: $node_dir/pod-logs
# A test node on a machine it shares: no eviction at all, and never collect the locally loaded
# images. The kubelet counts the machine's active page cache as memory in use, which a cold build
# fills (a CI run saw both nodes tainted for 5 minutes and its pods evicted), and the disk is the
# machine's; running out of either is for the OOM killer and the pods' own errors to say.
evictionHard: {}
evictionPressureTransitionPeriod: 10s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 5s
fileCheckFrequency: 5s
# Its lease is renewed every 5 s (a quarter of its duration), so that the controller manager's
# short grace period (start.sh) finds a dead node quickly and a live one never late.
nodeLeaseDurationSeconds: 20
nodeStatusUpdateFrequency: 5s
YAML
  if [ "$node_gpus" -gt 0 ] && [ "${gpu_taint:-false}" = true ]; then
    echo 'registerWithTaints: [{key: nvidia.com/gpu, effect: NoSchedule}]' >>"$node_dir/kubelet.yaml"
  fi
}

# Its mount namespace, made once (it outlives a kill, as the host's mounts did before nodes had
# their own): a copy of the host's, private, with the node's own device plugin directory.
node_mounts() {
  findmnt -n "$mounts" >/dev/null 2>&1 && return
  mkdir -p "$node_dir/device-plugins" /var/lib/kubelet/device-plugins
  touch "$mounts"
  unshare --mount="$mounts" --propagation private \
    mount --bind "$node_dir/device-plugins" /var/lib/kubelet/device-plugins
}

node_start() {
  local pid
  for pid in $(pids_of "node$index-kubelet"); do
    if kill -0 "$pid" 2>/dev/null; then echo "node.sh: node $index runs already (kubelet $pid)" >&2; exit 1; fi
  done
  [ -f "$node_dir/kubelet.yaml" ] || node_configure
  [ -z "$netns" ] || node_heal  # after a kill: its network back
  node_mounts
  spawn "node$index-containerd" "${on_node[@]}" containerd --config "$node_dir/containerd.toml"
  wait_for "node$index-containerd" 30 "${ctr[@]}" version
  # The images, once per node (a registry-less node has only what was imported into it).
  if ! [ -f "$node_dir/images-imported" ]; then
    local tar tars=(pause runtime operator)
    [ "$node_gpus" -eq 0 ] || tars+=(fake-gpu-plugin)
    for tar in "${tars[@]}"; do
      [ -f "$images/$tar.tar" ] || { echo "node.sh: $images/$tar.tar is missing: run scripts/build-images.sh" >&2; exit 1; }
      "${ctr[@]}" images import --no-unpack=false "$images/$tar.tar" >>"$log_dir/images.log" 2>&1
    done
    touch "$node_dir/images-imported"
  fi
  local labels=()
  if [ "$node_gpus" -gt 0 ]; then
    # What NVIDIA's GPU operator (GPU feature discovery) labels a GPU node with.
    labels=(--node-labels="nvidia.com/gpu.present=true,nvidia.com/gpu.product=Fake-GPU,nvidia.com/gpu.count=$node_gpus")
  fi
  spawn "node$index-kubelet" "${on_node[@]}" "$bin/kubelet" --config="$node_dir/kubelet.yaml" \
    --kubeconfig="$dir/kubeconfig" --root-dir="$node_dir/kubelet/root" \
    --cert-dir="$node_dir/kubelet/pki" --hostname-override="$name" --node-ip="$node_ip" \
    "${labels[@]}" --v=1
  spawn "node$index-kube-proxy" "${on_node[@]}" "$bin/kube-proxy" --kubeconfig="$dir/kubeconfig" \
    --proxy-mode=iptables --hostname-override="$name" --cluster-cidr="$cluster_cidr" \
    --bind-address=127.0.0.1 --healthz-bind-address="127.0.0.1:$(free_port)" \
    --metrics-bind-address="127.0.0.1:$(free_port)" --conntrack-max-per-core=0 --v=1
  spawn "node$index-network-policy" "${on_node[@]}" "$network_policy_agent" \
    --kubeconfig="$dir/kubeconfig" --node-name="$name" --nfqueue-id="$network_policy_queue" --v=1
  # In a chain of its own (CIFAR-: stop.sh removes the cluster's chains by prefix); once per node.
  if ! "${in_node[@]}" iptables -t mangle -S CIFAR-NETWORK-POLICY >/dev/null 2>&1; then
    "${in_node[@]}" iptables -t mangle -N CIFAR-NETWORK-POLICY
    "${in_node[@]}" iptables -t mangle -A CIFAR-NETWORK-POLICY -j NFQUEUE --queue-num "$network_policy_queue"
    "${in_node[@]}" iptables -t mangle -A POSTROUTING -o cifar0 -m conntrack --ctstate NEW -j CIFAR-NETWORK-POLICY
  fi
  echo "$name" >"$node_dir/name"
}

# Every process of the node's pods: those in its cgroup root (v1's pids hierarchy, or v2's).
node_pod_processes() {
  local hierarchy=/sys/fs/cgroup/pids
  [ -f /sys/fs/cgroup/cgroup.controllers ] && hierarchy=/sys/fs/cgroup
  [ -d "$hierarchy$cgroup_root" ] || { echo "node.sh: no cgroup $hierarchy$cgroup_root" >&2; exit 1; }
  find "$hierarchy$cgroup_root" -name cgroup.procs -exec cat {} + 2>/dev/null
}

require_own_network() {
  [ "$index" -ge 2 ] || { echo "node.sh: node 1 runs the control plane's network; $command node 2 or later" >&2; exit 1; }
}

node_partition() {
  require_own_network
  ip link set "cifar-v$index" down
}

# The link up, and the route to the node's pods that the link's fall removed.
node_heal() {
  require_own_network
  ip link set "cifar-v$index" up
  ip route replace "$pod_cidr" via "$node_ip"
}

node_kill() {
  require_own_network
  # Its network first: a machine that loses power sends nothing more, not even the FIN of its
  # killed processes' connections (peers find out by their own timeouts).
  ip link set "cifar-v$index" down
  local daemon
  for daemon in kubelet kube-proxy network-policy containerd; do stop_daemon "node$index-$daemon" KILL; done
  pkill -9 -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null || true
  # Again until none is left: a process may fork between the read and the kill.
  local pid pids
  for _ in $(seq 20); do
    pids=$(node_pod_processes)
    [ -n "$pids" ] || return 0
    for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
    sleep 0.2
  done
  echo "node.sh: processes of node $index's pods outlived 20 rounds of SIGKILL: $pids" >&2
  exit 1
}

case $command in
  network) node_network ;;
  start) node_start ;;
  kill) node_kill ;;
  partition) node_partition ;;
  heal) node_heal ;;
  import) "${ctr[@]}" images import --no-unpack=false "${4:?node.sh import DIR INDEX TAR}" >>"$log_dir/images.log" 2>&1 ;;
  name) cat "$node_dir/name" ;;
  *) echo "node.sh: network|start|kill|partition|heal|import|name DIR INDEX [TAR]" >&2; exit 2 ;;
esac
