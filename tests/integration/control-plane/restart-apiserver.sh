#!/usr/bin/env bash
# Restarts the kube-apiserver that start.sh started in DIR (same flags, same etcd): every watch
# on it breaks, as in an apiserver upgrade or crash. Returns once it is ready again.
#   tests/integration/control-plane/restart-apiserver.sh DIR
set -euo pipefail
dir=$(cd "$1" && pwd)
old=$(cat "$dir/kube-apiserver.pid")
kill "$old" 2>/dev/null || true
for _ in $(seq 100); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
kill -9 "$old" 2>/dev/null || true
bash "$dir/kube-apiserver.sh" >>"$dir/kube-apiserver.log" 2>&1 </dev/null &
new=$!
echo "$new" >"$dir/kube-apiserver.pid"
sed -i "s/^$old\$/$new/" "$dir/pids"
server=$(awk '$1 == "server:" {print $2}' "$dir/kubeconfig")
for _ in $(seq 600); do
  curl -fs --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
    "$server/readyz" >/dev/null 2>&1 && exit 0
  sleep 0.2
done
echo "restart-apiserver.sh: kube-apiserver did not come back within 120s" >&2
exit 1
