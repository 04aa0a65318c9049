#!/usr/bin/env bash
# Starts etcd and kube-apiserver (built by deploy/local-cluster/build.sh) on 127.0.0.1 with a fresh CA, serving and
# admin client certificates and an empty etcd, for one test run: everything lives in DIR, which gets `kubeconfig`
# (admin, O=system:masters), `pids` (for stop.sh) and the logs. No kubelet, scheduler or
# controller-manager: pods stay Pending unless a test plays the kubelet through the API.
#   tests/integration/control-plane/start.sh DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mkdir -p "$1" && cd "$1" && pwd)
cluster=$here/../../../deploy/local-cluster  # its build, certificates and helpers
bin=$("$cluster/build.sh")
# Every run starts empty: a control plane left running in DIR is stopped, its data removed.
"$here/stop.sh" "$dir"
rm -rf "$dir/pki" "$dir/etcd" "$dir/apiserver-certs" "$dir/kubeconfig"
mkdir -p "$dir/pki" "$dir/etcd"
: >"$dir/pids"

log_dir=$dir
source "$cluster/lib.sh"

api_port=$(free_port)
"$cluster/certs.sh" "$dir" "https://127.0.0.1:$api_port" \
  IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes.default.svc test

etcd_port=$(free_port)
peer_port=$(free_port)
"$bin/etcd" --name=test --data-dir="$dir/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
  --initial-cluster="test=http://127.0.0.1:$peer_port" --unsafe-no-fsync=true --log-level=warn \
  >"$dir/etcd.log" 2>&1 &
echo "$!" >>"$dir/pids"
wait_for etcd 30 curl -fs "http://127.0.0.1:$etcd_port/health"

# Kept in DIR so that restart-apiserver.sh can start the same apiserver again.
cat >"$dir/kube-apiserver.sh" <<COMMAND
exec "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \\
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
  --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
  --client-ca-file="$dir/pki/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc \
  --service-account-signing-key-file="$dir/pki/service-account.key" \
  --service-account-key-file="$dir/pki/service-account.key" \
  --service-cluster-ip-range=10.0.0.0/24 --authorization-mode=RBAC \
  --disable-admission-plugins=ServiceAccount --allow-privileged=true \
  --cert-dir="$dir/apiserver-certs" --v=1
COMMAND
bash "$dir/kube-apiserver.sh" >>"$dir/kube-apiserver.log" 2>&1 &
echo "$!" >"$dir/kube-apiserver.pid"
echo "$!" >>"$dir/pids"
wait_for kube-apiserver 120 curl -fs --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" \
  --key "$dir/pki/admin.key" "https://127.0.0.1:$api_port/readyz"

echo "$dir/kubeconfig"
