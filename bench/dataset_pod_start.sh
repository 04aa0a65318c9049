#!/usr/bin/env bash
# A pod's start-to-first-step time with its data in the bucket against the data on a volume (issue
# 59), on the local cluster (one node; deploy/local-cluster, started here from this build's images
# and stopped at the end; root). The store is the one `make cluster S3=1` starts
# (deploy/local-cluster/object-store.sh) with the whole of CIFAR-10 in it; the volume is a hostPath
# PersistentVolume with the same files. Each round submits two one-worker all-reduce jobs, one
# after the other (simplecnn, batch 64, checkpoints in the bucket for both): `dataset.uri` (the pod
# fetches 184 MB into its emptyDir) and `dataset.volume`. From the worker's log with kubelet
# timestamps: its container's first line (the process is up) to the line it prints as it takes
# its first step (`model ...: N trainable parameters, ...`: data read, model built; a job logs no
# single step), and the pod's creation (whole seconds) to that line. Prints a markdown table of
# the medians.
#   bench/dataset_pod_start.sh [BUILD_DIR]     ROUNDS=5
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${ROUNDS:-5}
[ -x "$build/bin/cifar-train" ] || { echo "missing $build/bin/cifar-train: build it first" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-pod-start.XXXXXX")
chmod 755 "$work"
cleanup() {
  deploy/object-store/stop.sh "$work/store" >/dev/null 2>&1 || true
  deploy/local-cluster/stop.sh "$work/cluster" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
bash scripts/build-images.sh --prebuilt "$build" --out "$work/images" >&2
deploy/local-cluster/start.sh --nodes 1 "$work/cluster" "$work/images" >&2
data=$(scripts/cifar10-data.sh)
cp -r "$data" "$work/cifar10" && chmod -R a+rX "$work/cifar10"
deploy/local-cluster/object-store.sh "$work/store" "$work/cifar10" >&2
k() { kubectl --kubeconfig "$work/cluster/kubeconfig" "$@"; }
k create secret generic checkpoint-store-keys --from-env-file="$work/store/credentials.env" >&2
k apply -f - >&2 <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: bench-cifar10}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadOnlyMany]
  storageClassName: ''
  hostPath: {path: $work/cifar10, type: Directory}
  claimRef: {namespace: default, name: cifar10}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: cifar10}
spec:
  accessModes: [ReadOnlyMany]
  storageClassName: ''
  volumeName: bench-cifar10
  resources: {requests: {storage: 1Gi}}
YAML

# first_step NAME DATASET_SOURCE: "SECONDS_FROM_FIRST_LINE SECONDS_FROM_CREATION" of its worker, to
# its first step.
first_step() {
  local name=$1 source=$2 log="" created
  k apply -f - >&2 <<YAML
apiVersion: cifartrain.io/v1alpha1
kind: CifarTrainJob
metadata: {name: $name}
spec:
  model: {name: simplecnn}
  dataset: {name: cifar10, $source}
  training: {epochs: 1, batchSize: 64}
  checkpoint:
    uri: s3://checkpoints/runs
    s3: {endpoint: 'http://10.244.0.1:8333', addressing: Path, credentialsSecret: checkpoint-store-keys}
  strategy: {type: AllReduce, allReduce: {backend: gloo}}
  replicaSpecs:
    Worker: {replicas: 1}
YAML
  for _ in $(seq 600); do
    log=$(k logs --timestamps "$name-worker-0" 2>/dev/null || true)
    [[ $log == *" trainable parameters, "* ]] && break
    sleep 0.5
  done
  [[ $log == *" trainable parameters, "* ]] || { echo "$name: no first step in 300 s: $log" >&2; exit 1; }
  created=$(k get pod "$name-worker-0" -o jsonpath='{.metadata.creationTimestamp}')
  k delete ctj "$name" --wait=true >&2
  printf '%s\n' "$log" >"$work/log"
  python3 - "$created" "$work/log" <<'PY'
import sys, datetime
def at(stamp):  # RFC 3339 with nanoseconds: keep microseconds
    day, frac = stamp.rstrip("Z").split(".") if "." in stamp else (stamp.rstrip("Z"), "0")
    return datetime.datetime.fromisoformat(day + "." + frac[:6].ljust(6, "0"))
lines = open(sys.argv[2]).read().splitlines()
first = at(lines[0].split(" ", 1)[0])
step = next(at(l.split(" ", 1)[0]) for l in lines if " trainable parameters, " in l)
created = datetime.datetime.fromisoformat(sys.argv[1].rstrip("Z"))
print(f"{(step - first).total_seconds():.2f} {(step - created).total_seconds():.2f}")
PY
}
bucket=() volume=()
for round in $(seq "$rounds"); do
  bucket+=("$(first_step "bucket-$round" "uri: s3://checkpoints/data/cifar10")")
  volume+=("$(first_step "volume-$round" "volume: {claimName: cifar10}")")
  echo "round $round: bucket ${bucket[-1]}, volume ${volume[-1]}" >&2
done
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
echo "| data | container's first line to first step | pod created to first step |"
echo "|---|---:|---:|"
for row in "a volume (dataset.volume):volume" "the bucket (dataset.uri, an emptyDir):bucket"; do
  declare -n runs="${row#*:}"
  printf '| %s | %.2f s | %.2f s |\n' "${row%%:*}" \
    "$(printf '%s\n' "${runs[@]}" | awk '{print $1}' | median)" \
    "$(printf '%s\n' "${runs[@]}" | awk '{print $2}' | median)"
done
echo
echo "Every round (bucket / volume, container's first line to first step): $(
  for i in "${!bucket[@]}"; do printf '%s / %s; ' "${bucket[$i]%% *}" "${volume[$i]%% *}"; done)"
