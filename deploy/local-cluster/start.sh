#!/usr/bin/env bash
# Starts the local cluster: a real Kubernetes cluster of one or more nodes on this machine, for
# `make cluster` and the end-to-end tests. etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, and per node (node.sh) containerd + runc with the CNI bridge plugin, a kubelet,
# kube-proxy and a NetworkPolicy agent (kube-network-policies, deploy/tools), the Kubernetes parts
# of one pinned Kubernetes version (build.sh node); CoreDNS on the host. Node 1 is this machine;
# nodes 2.. each live in a network namespace of their own (node.sh says what they share and what
# not). Everything of the cluster lives in DIR (`kubeconfig`, logs, state)
# except what the kubelets and containerd insist on writing elsewhere, which stop.sh removes.
# The images (scripts/build-images.sh) are loaded into every node, and the operator and its CRD
# installed with the Helm chart (deploy/helm).
#   deploy/local-cluster/start.sh [--nodes N] [--gpus G [--gpu-taint]] [--node-monitor-grace S]
#                                 [--audit-log] DIR [IMAGES_DIR]
# N: 1 (default) to 8. IMAGES_DIR holds pause.tar (made here), runtime.tar and operator.tar
# (default ~/.cache/cifartrain/images).
# G (default 0): every node but node 1 is a GPU node with G fake nvidia.com/gpu (node.sh says
# what a GPU node has), and the cluster gets the RuntimeClass nvidia
# (deploy/kind/nvidia-runtimeclass.yaml); --gpu-taint taints the GPU nodes nvidia.com/gpu:NoSchedule
# as many GPU clusters do. The devices are not there: pods that ask for them are scheduled,
# allocated and given NVIDIA_VISIBLE_DEVICES as on a GPU node, and run on the CPU.
# S (default 20s): how long a node that stops answering stays Ready (the controller manager's
# --node-monitor-grace-period); deploy/sim-cluster's simulated nodes renew their leases less often.
# --audit-log: the API server writes every request it served (but Leases and health checks), one
# JSON line each with its verb, resource and client's user agent, to DIR/logs/audit.log (what
# bench/operator_fleet.sh counts an operator's requests by).
#
# Addresses: node 1's pod bridge cifar0 is 10.244.0.1/24, and the API server and CoreDNS listen
# there (every pod reaches them; nothing listens on eth0); node N's pods are 10.244.N-1.0/24.
# Services: 10.96.0.0/24. One cluster at a time per machine. Must run as root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
nodes=1 gpus=0 gpu_taint=false audit=false
# A node that stops answering is NotReady after this long (Kubernetes' default is 50 s; here a node
# death is something to show, so it is found quickly). Every kubelet renews its lease every 5 s
# (node.sh).
node_monitor_grace_period=20s
while [[ "${1:-}" == --* ]]; do
  case $1 in
    --nodes) nodes=${2:-}; shift 2 ;;
    --gpus) gpus=${2:-}; shift 2 ;;
    --gpu-taint) gpu_taint=true; shift ;;
    --node-monitor-grace) node_monitor_grace_period=${2:-}; shift 2 ;;
    --audit-log) audit=true; shift ;;
    *) echo "start.sh: unknown option $1 (--nodes N, --gpus G, --gpu-taint, --node-monitor-grace S, --audit-log)" >&2; exit 2 ;;
  esac
done
[[ "$nodes" =~ ^[1-8]$ ]] || { echo "start.sh: --nodes takes 1 to 8, not '$nodes'" >&2; exit 2; }
[[ "$node_monitor_grace_period" =~ ^[1-9][0-9]*s$ ]] || { echo "start.sh: --node-monitor-grace takes seconds such as 50s, not '$node_monitor_grace_period'" >&2; exit 2; }
[[ "$gpus" =~ ^([0-9]|[1-5][0-9]|6[0-4])$ ]] || { echo "start.sh: --gpus takes 0 to 64, not '$gpus'" >&2; exit 2; }
if [ "$gpus" -gt 0 ] && [ "$nodes" -lt 2 ]; then
  echo "start.sh: --gpus makes nodes 2.. GPU nodes (node 1 runs the control plane and the operator): --nodes 2 or more" >&2
  exit 2
fi
dir=$(mkdir -p "$1" && cd "$1" && pwd)
images=${2:-${CIFAR_IMAGE_CACHE:-$HOME/.cache/cifartrain/images}}
[ "$(id -u)" -eq 0 ] || { echo "start.sh: a kubelet and containerd need root" >&2; exit 1; }

api_ip=10.244.0.1  # node 1's bridge
cluster_cidr=10.244.0.0/16
service_cidr=10.96.0.0/24
api_port=6443
bin=$("$here/build.sh" node)
network_policy_agent="$("$repo/deploy/tools/build.sh" kube-network-policies)/network-policy-agent"
"$here/stop.sh" "$dir"  # whatever a previous run left
# stop.sh removes every KUBE- iptables chain and the bridge: refuse to run beside another cluster.
if iptables -t nat -S 2>/dev/null | grep -q '^-N KUBE-SERVICES' || ip link show cifar0 >/dev/null 2>&1; then
  echo "start.sh: another cluster runs on this machine (KUBE-SERVICES chain or bridge cifar0): stop it first" >&2
  exit 1
fi
rm -rf "$dir" && mkdir -p "$dir"/{pki,etcd,logs}
: >"$dir/pids"
log() { echo "start.sh: $*" >&2; }
log_dir=$dir/logs
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=host.sh
source "$here/host.sh"

# --- what stop.sh must restore: the host's settings before the cluster changed them ----------
record_host "${host_paths[@]}" >"$dir/host-before"
# The cluster itself, for node.sh, kueue.sh and stop.sh (sourced: shell assignments).
cat >"$dir/cluster.env" <<ENV
bin=$bin
nodes=$nodes
images=$images
cluster_dns=$api_ip
cluster_cidr=$cluster_cidr
pause_image=localhost/cifartrain/pause:dev
network_policy_agent=$network_policy_agent
gpus=$gpus
gpu_taint=$gpu_taint
ENV

# --- certificates: one CA; every component uses the admin identity (a test cluster) -----------
"$here/certs.sh" "$dir" "https://$api_ip:$api_port" \
  "IP:$api_ip,IP:10.96.0.1,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
  cifartrain
kubectl=(kubectl --kubeconfig "$dir/kubeconfig")

# --- the nodes' networks; node 1's bridge first: the API server binds its address ----------------
for i in $(seq "$nodes"); do "$here/node.sh" network "$dir" "$i"; done

# --- control plane ------------------------------------------------------------------------------
etcd_port=$(free_port)
peer_port=$(free_port)
spawn etcd "$bin/etcd" --name=cluster --data-dir="$dir/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
  --initial-cluster="cluster=http://127.0.0.1:$peer_port" --unsafe-no-fsync=true --log-level=warn
wait_for etcd 30 curl -fs "http://127.0.0.1:$etcd_port/health"

audit_flags=()
if $audit; then
  cat >"$dir/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/metrics"]
- level: Metadata
POLICY
  audit_flags=(--audit-policy-file="$dir/audit-policy.yaml" --audit-log-path="$dir/logs/audit.log"
    --audit-log-maxsize=2048 --audit-log-mode=batch)
fi

spawn kube-apiserver "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
  --bind-address="$api_ip" --advertise-address="$api_ip" --secure-port="$api_port" \
  --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
  --client-ca-file="$dir/pki/ca.crt" \
  --kubelet-client-certificate="$dir/pki/admin.crt" --kubelet-client-key="$dir/pki/admin.key" \
  --kubelet-preferred-address-types=InternalIP \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-signing-key-file="$dir/pki/service-account.key" \
  --service-account-key-file="$dir/pki/service-account.key" \
  --service-cluster-ip-range="$service_cidr" --authorization-mode=Node,RBAC \
  --cert-dir="$dir/apiserver-certs" "${audit_flags[@]}" --v=1
wait_for kube-apiserver 120 "${kubectl[@]}" get --raw /readyz
# The AdminNetworkPolicy API (the administrator's rules, above a namespace's NetworkPolicies), which
# every node's policy agent enforces: before the nodes, so that their agents find it.
"${kubectl[@]}" apply -f "$(dirname "$network_policy_agent")/policy.networking.k8s.io_adminnetworkpolicies.yaml" >/dev/null
"${kubectl[@]}" wait --for=condition=Established crd/adminnetworkpolicies.policy.networking.k8s.io --timeout=30s >/dev/null

spawn kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$dir/kubeconfig" \
  --authentication-kubeconfig="$dir/kubeconfig" --authorization-kubeconfig="$dir/kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$(free_port)" --leader-elect=false \
  --service-account-private-key-file="$dir/pki/service-account.key" --root-ca-file="$dir/pki/ca.crt" \
  --use-service-account-credentials=false --service-cluster-ip-range="$service_cidr" \
  --controllers='*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller' \
  --node-monitor-grace-period="$node_monitor_grace_period" --node-monitor-period=2s --v=1
spawn kube-scheduler "$bin/kube-scheduler" --kubeconfig="$dir/kubeconfig" \
  --authentication-kubeconfig="$dir/kubeconfig" --authorization-kubeconfig="$dir/kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$(free_port)" --leader-elect=false --v=1

# --- the nodes: the pause image (Kubernetes' own pause.c from the pinned module, built static),
# then each node's containerd (the images imported), kubelet and kube-proxy -----------------------
"$here/build-pause.sh" "$images/pause.tar" >>"$dir/logs/images.log" 2>&1
if [ "$gpus" -gt 0 ]; then
  "$here/build-fake-gpu-plugin.sh" --image "$images/fake-gpu-plugin.tar" >>"$dir/logs/images.log" 2>&1
fi
for i in $(seq "$nodes"); do "$here/node.sh" start "$dir" "$i"; done

# --- CoreDNS on the host, on the gateway: the kubelet's clusterDNS -------------------------------
coredns_ready_port=$(free_port)
cat >"$dir/Corefile" <<COREFILE
.:53 {
    bind $api_ip
    errors
    ready 127.0.0.1:$coredns_ready_port
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $dir/kubeconfig cifartrain
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
COREFILE
spawn coredns "$bin/coredns" -conf "$dir/Corefile"

for i in $(seq "$nodes"); do
  wait_for "node$i-kubelet" 120 "${kubectl[@]}" wait --for=condition=Ready "node/$("$here/node.sh" name "$dir" "$i")" --timeout=1s
done
wait_for coredns 60 curl -fs "http://127.0.0.1:$coredns_ready_port/ready"
# pods reach the API server through the kubernetes Service: kube-proxy's rules must be there
wait_for node1-kube-proxy 60 bash -c "iptables -t nat -S KUBE-SERVICES | grep -q default/kubernetes"
for i in $(seq 2 "$nodes"); do
  wait_for "node$i-kube-proxy" 60 bash -c "nsenter --net=/var/run/netns/cifar-node$i iptables -t nat -S KUBE-SERVICES | grep -q default/kubernetes"
done
# the ServiceAccount admission needs each namespace's default account (controller-manager's)
wait_for kube-controller-manager 60 "${kubectl[@]}" get serviceaccount default -n default

# --- the GPU nodes: the RuntimeClass nvidia, the fake GPUs' device plugin (a DaemonSet on the
# nodes labelled nvidia.com/gpu.present=true), and their GPUs allocatable once it registered -----
advertises_gpus() { [ "$("${kubectl[@]}" get node "$1" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = "$gpus" ]; }
if [ "$gpus" -gt 0 ]; then
  "${kubectl[@]}" apply -f "$repo/deploy/kind/nvidia-runtimeclass.yaml" >/dev/null
  sed "s/{name: FAKE_GPUS, value: \"[0-9]*\"}/{name: FAKE_GPUS, value: \"$gpus\"}/" \
    "$here/fake-gpu-plugin/daemonset.yaml" | "${kubectl[@]}" apply -f - >/dev/null
  for i in $(seq 2 "$nodes"); do
    node=$("$here/node.sh" name "$dir" "$i")
    for _ in $(seq 120); do advertises_gpus "$node" && break; sleep 1; done
    if ! advertises_gpus "$node"; then
      log "node $i advertises no $gpus nvidia.com/gpu within 120 s; its device plugin:"
      "${kubectl[@]}" -n kube-system describe pods -l app.kubernetes.io/name=fake-gpu-plugin >&2 || true
      "${kubectl[@]}" -n kube-system logs -l app.kubernetes.io/name=fake-gpu-plugin --tail 20 >&2 || true
      exit 1
    fi
  done
fi

# --- the CRD and the operator: the Helm chart, as a user installs it ----------------------------
# Its values (kept for whoever installs it again, as the Helm e2e test does): progress every 5 s
# (the chart's default is 15: the tests watch it move within a short job), and the operator on
# node 1, the machine itself, so that killing another node never takes the operator along.
cat >"$dir/operator-values.yaml" <<VALUES
progressIntervalSeconds: 5
nodeSelector: {kubernetes.io/hostname: $("$here/node.sh" name "$dir" 1)}
VALUES
# Its namespace enforces Pod Security Admission's `restricted` level: the chart's pods pass it.
"${kubectl[@]}" create namespace cifartrain-system >/dev/null
"${kubectl[@]}" label namespace cifartrain-system pod-security.kubernetes.io/enforce=restricted >/dev/null
helm="$("$repo/deploy/tools/build.sh" helm)/helm"
if ! "$helm" --kubeconfig "$dir/kubeconfig" install cifar-operator "$repo/deploy/helm/cifar-operator" \
    --namespace cifartrain-system -f "$dir/operator-values.yaml" \
    --wait --timeout 120s >>"$dir/logs/install.log" 2>&1; then
  log "the operator did not become ready:"
  tail -20 "$dir/logs/install.log" >&2
  "${kubectl[@]}" -n cifartrain-system describe pods >&2 || true
  "${kubectl[@]}" -n cifartrain-system logs deployment/cifar-operator >&2 || true
  exit 1
fi

echo "$dir/kubeconfig"
cat >&2 <<DONE
The cluster is up ($nodes node(s)$([ "$gpus" -eq 0 ] || echo ", $gpus fake GPUs on each but node 1"), the operator in namespace cifartrain-system: Helm release
cifar-operator). Point kubectl (and helm) at it:
  export KUBECONFIG=$dir/kubeconfig
  kubectl get nodes
Then volumes and a job: README, "Run it on Kubernetes", steps 3 and 4.
Stop it and clean up: deploy/local-cluster/stop.sh $dir (or make cluster-stop)
DONE
