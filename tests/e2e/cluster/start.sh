#!/usr/bin/env bash
# Starts a real one-node Kubernetes cluster on this machine, for the end-to-end tests and for
# `make cluster`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy (all one pinned Kubernetes version, built by control-plane/build.sh node), containerd
# + runc with the bridge CNI plugin, and CoreDNS on the host. Everything of the cluster lives in
# DIR (`kubeconfig`, logs, state) except what the kubelet and containerd insist on writing
# elsewhere, which stop.sh removes. Then it loads the images (scripts/build-images.sh) into
# containerd, and installs the operator and its CRD with the Helm chart (deploy/helm).
#   tests/e2e/cluster/start.sh DIR [IMAGES_DIR]
# IMAGES_DIR holds runtime.tar and operator.tar (default ~/.cache/cifartrain/images).
#
# Addresses: the pods' bridge cifar0 is 10.244.0.1/24 and the API server, the kubelet and CoreDNS
# listen there (pods reach them; nothing listens on eth0). Services: 10.96.0.0/24. One cluster at
# a time per machine. Must run as root (a kubelet and a container runtime).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
dir=$(mkdir -p "$1" && cd "$1" && pwd)
images=${2:-${CIFAR_IMAGE_CACHE:-$HOME/.cache/cifartrain/images}}
[ "$(id -u)" -eq 0 ] || { echo "start.sh: a kubelet and containerd need root" >&2; exit 1; }

gateway=10.244.0.1
pod_cidr=10.244.0.0/24
service_cidr=10.96.0.0/24
api_port=6443
node=$(hostname | tr '[:upper:]' '[:lower:]')

bin=$("$repo/tests/integration/control-plane/build.sh" node)
"$here/stop.sh" "$dir"  # whatever a previous run left
# stop.sh removes every KUBE- iptables chain and the bridge: refuse to run beside another cluster.
if iptables -t nat -S 2>/dev/null | grep -q '^-N KUBE-SERVICES' || ip link show cifar0 >/dev/null 2>&1; then
  echo "start.sh: another cluster runs on this machine (KUBE-SERVICES chain or bridge cifar0): stop it first" >&2
  exit 1
fi
rm -rf "$dir" && mkdir -p "$dir"/{pki,etcd,containerd,cni/net.d,cni/ipam,kubelet,pod-logs,logs}
: >"$dir/pids"
log() { echo "start.sh: $*" >&2; }
log_dir=$dir/logs
source "$repo/tests/integration/control-plane/lib.sh"
spawn() {  # name, command...: runs in the background, logs to logs/NAME.log, pid saved for stop.sh
  local name=$1
  shift
  "$@" >"$dir/logs/$name.log" 2>&1 &
  echo "$! $name" >>"$dir/pids"
}

# --- what stop.sh must restore: the host's settings before the cluster changed them ----------
{
  echo "bin=$bin"
  echo "ip_forward=$(cat /proc/sys/net/ipv4/ip_forward)"
  echo "bridge_nf_call_iptables=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo)"
  for path in /var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd /var/run/netns /etc/cni; do
    [ -e "$path" ] && echo "existed=$path"
  done
} >"$dir/host-before"

# --- certificates: one CA; every component uses the admin identity (a test cluster) -----------
"$repo/tests/integration/control-plane/certs.sh" "$dir" "https://$gateway:$api_port" \
  "IP:$gateway,IP:10.96.0.1,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
  cifartrain
(
  cd "$dir/pki"  # the kubelet's serving certificate
  openssl req -newkey rsa:2048 -nodes -keyout kubelet.key -out kubelet.csr -subj "/CN=$node"
  printf 'subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\n' "$gateway" "$node" >kubelet.ext
  openssl x509 -req -in kubelet.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile kubelet.ext -out kubelet.crt
) >>"$dir/logs/pki.log" 2>&1
kubectl=(kubectl --kubeconfig "$dir/kubeconfig")

# --- the pods' bridge, made before the API server binds its gateway address --------------------
ip link add cifar0 type bridge
ip addr add "$gateway/24" dev cifar0
ip link set cifar0 up
echo 1 >/proc/sys/net/ipv4/ip_forward
# kube-proxy's Service rules must see traffic between pods on the same bridge
echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables

# --- control plane ------------------------------------------------------------------------------
etcd_port=$(free_port)
peer_port=$(free_port)
spawn etcd "$bin/etcd" --name=cluster --data-dir="$dir/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
  --initial-cluster="cluster=http://127.0.0.1:$peer_port" --unsafe-no-fsync=true --log-level=warn
wait_for etcd 30 curl -fs "http://127.0.0.1:$etcd_port/health"

spawn kube-apiserver "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
  --bind-address="$gateway" --advertise-address="$gateway" --secure-port="$api_port" \
  --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
  --client-ca-file="$dir/pki/ca.crt" \
  --kubelet-client-certificate="$dir/pki/admin.crt" --kubelet-client-key="$dir/pki/admin.key" \
  --kubelet-preferred-address-types=InternalIP \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-signing-key-file="$dir/pki/service-account.key" \
  --service-account-key-file="$dir/pki/service-account.key" \
  --service-cluster-ip-range="$service_cidr" --authorization-mode=Node,RBAC \
  --cert-dir="$dir/apiserver-certs" --v=1
wait_for kube-apiserver 120 "${kubectl[@]}" get --raw /readyz

spawn kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$dir/kubeconfig" \
  --authentication-kubeconfig="$dir/kubeconfig" --authorization-kubeconfig="$dir/kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$(free_port)" --leader-elect=false \
  --service-account-private-key-file="$dir/pki/service-account.key" --root-ca-file="$dir/pki/ca.crt" \
  --use-service-account-credentials=false --service-cluster-ip-range="$service_cidr" \
  --controllers='*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller' --v=1
spawn kube-scheduler "$bin/kube-scheduler" --kubeconfig="$dir/kubeconfig" \
  --authentication-kubeconfig="$dir/kubeconfig" --authorization-kubeconfig="$dir/kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$(free_port)" --leader-elect=false --v=1

# --- containerd + runc + CNI ----------------------------------------------------------------------
cat >"$dir/cni/net.d/10-cifar.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "cifar",
  "plugins": [
    {"type": "bridge", "bridge": "cifar0", "isGateway": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
              "ranges": [[{"subnet": "$pod_cidr", "gateway": "$gateway"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}}
  ]
}
CNI
cat >"$dir/containerd/config.toml" <<TOML
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$dir/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/cifartrain/pause:dev"
  # these VMs lack CAP_SYS_RESOURCE: a negative oom_score_adj for sandboxes fails every start
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
TOML
spawn containerd containerd --config "$dir/containerd/config.toml"
ctr=(ctr --address "$dir/containerd.sock" -n k8s.io)
wait_for containerd 30 "${ctr[@]}" version

# The images: pause (the sandbox: Kubernetes' own pause.c from the pinned module, built static),
# then the project's.
"$here/build-pause.sh" "$images/pause.tar" >>"$dir/logs/images.log" 2>&1
for tar in pause runtime operator; do
  [ -f "$images/$tar.tar" ] || { log "$images/$tar.tar is missing: run scripts/build-images.sh"; exit 1; }
  "${ctr[@]}" images import --no-unpack=false "$images/$tar.tar" >>"$dir/logs/images.log" 2>&1
done

# --- kubelet ---------------------------------------------------------------------------------------
cat >"$dir/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $gateway
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $(free_port)
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: AlwaysAllow}
tlsCertFile: $dir/pki/kubelet.crt
tlsPrivateKeyFile: $dir/pki/kubelet.key
clusterDomain: cluster.local
clusterDNS: [$gateway]
resolvConf: /etc/resolv.conf
# cgroup v1 on these VMs; no systemd; swap is tolerated; no CAP_SYS_RESOURCE (oomScoreAdj 0)
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
oomScoreAdj: 0
containerRuntimeEndpoint: unix://$dir/containerd.sock
podLogsDir: $dir/pod-logs
# a test node: never evict for disk, never collect the locally loaded images
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 5s
fileCheckFrequency: 5s
YAML
spawn kubelet "$bin/kubelet" --config="$dir/kubelet/config.yaml" --kubeconfig="$dir/kubeconfig" \
  --root-dir="$dir/kubelet/root" --cert-dir="$dir/kubelet/pki" --hostname-override="$node" \
  --node-ip="$gateway" --v=1
spawn kube-proxy "$bin/kube-proxy" --kubeconfig="$dir/kubeconfig" --proxy-mode=iptables \
  --hostname-override="$node" --cluster-cidr="$pod_cidr" --bind-address=127.0.0.1 \
  --healthz-bind-address="127.0.0.1:$(free_port)" --metrics-bind-address="127.0.0.1:$(free_port)" \
  --conntrack-max-per-core=0 --v=1

# --- CoreDNS on the host, on the gateway: the kubelet's clusterDNS -------------------------------
coredns_ready_port=$(free_port)
cat >"$dir/Corefile" <<COREFILE
.:53 {
    bind $gateway
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

wait_for kubelet 120 "${kubectl[@]}" wait --for=condition=Ready "node/$node" --timeout=1s
wait_for coredns 60 curl -fs "http://127.0.0.1:$coredns_ready_port/ready"
# pods reach the API server through the kubernetes Service: kube-proxy's rules must be there
wait_for kube-proxy 60 bash -c "iptables -t nat -S KUBE-SERVICES | grep -q default/kubernetes"
# the ServiceAccount admission needs each namespace's default account (controller-manager's)
wait_for kube-controller-manager 60 "${kubectl[@]}" get serviceaccount default -n default

# --- the CRD and the operator: the Helm chart, as a user installs it ----------------------------
# Progress every 5 s (the chart's default is 15): the tests watch it move within a short job.
helm="$("$repo/tests/tools/build.sh" helm)/helm"
if ! "$helm" --kubeconfig "$dir/kubeconfig" install cifar-operator "$repo/deploy/helm/cifar-operator" \
    --namespace cifartrain-system --create-namespace --set progressIntervalSeconds=5 \
    --wait --timeout 120s >>"$dir/logs/install.log" 2>&1; then
  log "the operator did not become ready:"
  tail -20 "$dir/logs/install.log" >&2
  "${kubectl[@]}" -n cifartrain-system describe pods >&2 || true
  "${kubectl[@]}" -n cifartrain-system logs deployment/cifar-operator >&2 || true
  exit 1
fi

echo "$dir/kubeconfig"
cat >&2 <<DONE
The cluster is up (node $node, operator in namespace cifartrain-system: Helm release
cifar-operator). Point kubectl (and helm) at it:
  export KUBECONFIG=$dir/kubeconfig
  kubectl get nodes
Then volumes and a job: README, "Run it on Kubernetes", steps 3 and 4.
Stop it and clean up: tests/e2e/cluster/stop.sh $dir
DONE
