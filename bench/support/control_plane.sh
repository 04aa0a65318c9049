# Sourced by the operator benchmarks (with $root set): a private control plane (a real
# kube-apiserver + etcd, tests/integration/control-plane) in a temporary directory, stopped on
# exit with the operator it runs ($operator_pid), and the CifarTrainJob CRD applied. Defines
# $work, $kubeconfig, k (kubectl on it) and free_port.
control_plane=$root/tests/integration/control-plane
"$root/deploy/local-cluster/build.sh" >/dev/null
work=$(mktemp -d)
operator_pid=""
cleanup() {
  [ -n "$operator_pid" ] && kill -9 "$operator_pid" 2>/dev/null
  "$control_plane/stop.sh" "$work/cp" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
"$control_plane/start.sh" "$work/cp" >/dev/null
kubeconfig=$work/cp/kubeconfig
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
k apply --server-side -f "$root/deploy/crds/cifartrain.io_cifartrainjobs.yaml" >/dev/null
source "$root/deploy/local-cluster/lib.sh"  # free_port
