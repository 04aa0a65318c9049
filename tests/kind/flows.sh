#!/usr/bin/env bash
# kind for real, as README "kind with GPUs" tells a user, on this machine: each flow creates its
# cluster with deploy/kind/create-cluster.sh (the node image built here when kindest/node cannot be
# pulled), runs its example to Succeeded, and deletes the cluster; then the machine must be as it
# was (no container, volume, mount, network interface or iptables rule left).
#   cpu       the default StorageClass provisioning a claim; the parameter-server example
#             (local-volumes.yaml, ps-job.yaml) with `kubectl get ctj -w` watching, its pods on
#             both workers; then the chart's test (create-cluster.sh ran it) and `helm
#             uninstall`, which must leave no operator or job behind (and keep the CRD).
#   fake-gpu  the GPU example on fake GPUs (the runtime image on the CPU, gloo): each worker pod on
#             a GPU worker with RuntimeClass nvidia and one device, the device in its process's
#             NVIDIA_VISIBLE_DEVICES, Succeeded. Its data comes from the local volume and it trains
#             FAKE_GPU_EPOCHS (default 1) epochs: these machines cannot download CIFAR-10, and the
#             example's five epochs of ResNet-20 on two CPU cores would take hours.
# Root with podman or Docker; 20-60 minutes on 2 cores. Not in `make test` (README, "kind with
# GPUs": why). Prints each step's time.
#   tests/kind/flows.sh IMAGES_DIR [cpu] [fake-gpu]     (IMAGES_DIR: scripts/build-images.sh's tars)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
images=$(cd "${1:?usage: flows.sh IMAGES_DIR [cpu] [fake-gpu]}" && pwd)
shift
flows=("$@")
((${#flows[@]})) || flows=(cpu fake-gpu)
for tar in operator runtime; do
  [ -f "$images/$tar.tar" ] || { echo "flows.sh: no $images/$tar.tar (make images)" >&2; exit 2; }
done
export CIFAR_IMAGE_CACHE=$images
KIND=$("$repo/deploy/tools/build.sh" kind)/kind
HELM=$("$repo/deploy/tools/build.sh" helm)/helm
export KIND HELM
engine=podman
docker info >/dev/null 2>&1 && engine=docker
export KIND_EXPERIMENTAL_PROVIDER=$engine  # kind would pick the docker CLI that answers nothing
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 passes=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; passes=$((passes + 1)); }
times=()
timed() {  # timed WHAT CMD...: runs CMD, records its wall time
  local what=$1 start=$SECONDS
  shift
  "$@"
  times+=("$what: $((SECONDS - start)) s")
  echo "flows: $what took $((SECONDS - start)) s" >&2
}

# What a cluster could leave behind on this machine.
machine_state() {
  echo "== containers"; "$engine" ps -a --format '{{.Names}}' | sort
  echo "== volumes"; "$engine" volume ls -q | sort
  echo "== mounts"; awk '{print $2}' /proc/mounts | grep -Ev '^/(proc|sys|dev)(/|$)' | sort
  echo "== interfaces"; ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
  echo "== iptables"; iptables-save | grep -Ev '^(#|:)' | sort
}

# The examples' data, as README says for a machine that cannot download CIFAR-10.
data=/srv/cifartrain
mkdir -p "$data/cifar10" "$data/checkpoints"
chmod 777 "$data/checkpoints"
bash "$repo/../shared/data/cifar10/make-binary.sh" "$data/cifar10" >/dev/null

# wait_job CONTEXT JOB TIMEOUT: until the job ends; prints its state.
wait_job() {
  local state="" deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    state=$(kubectl --context "$1" get ctj "$2" -o jsonpath='{.status.state}' 2>/dev/null || true)
    case $state in Succeeded|Failed) break ;; esac
    sleep 10
  done
  echo "${state:-none}"
}

# check_default_storage CONTEXT CLUSTER: the node image's default StorageClass provisions a claim
# that names none once a pod uses it (a directory on that pod's node), and removes it with the
# claim. The pod runs the nodes' pause image (whichever their containerd config names).
check_default_storage() {
  local ctx=$1 cluster=$2 pause node="" dir="" phase="" left=""
  k() { kubectl --context "$ctx" "$@"; }
  # The volumes' directories on the pod's node (local-path names them pvc-UID_NAMESPACE_CLAIM).
  provisioned() {
    [ -n "$node" ] || { echo "(the pod had no node)"; return; }
    "$engine" exec "$node" ls /var/local-path-provisioner 2>&1 || echo "(cannot list it on $node)"
  }
  pause=$("$engine" exec "$cluster-control-plane" sed -n 's/^ *sandbox_image = "\(.*\)"/\1/p' \
    /etc/containerd/config.toml)
  k apply -f - <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: scratch}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Mi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: scratch-user}
spec:
  containers: [{name: pause, image: "$pause", imagePullPolicy: Never, volumeMounts: [{name: scratch, mountPath: /scratch}]}]
  volumes: [{name: scratch, persistentVolumeClaim: {claimName: scratch}}]
YAML
  k wait --for=condition=Ready pod/scratch-user --timeout=120s >/dev/null || true
  phase=$(k get pvc scratch -o jsonpath='{.status.phase} {.spec.storageClassName}')
  node=$(k get pod scratch-user -o jsonpath='{.spec.nodeName}')
  dir=$(provisioned)
  [ "$phase" = "Bound standard" ] && [[ $dir == pvc-*_default_scratch ]] &&
    pass "the default StorageClass provisioned a claim (a directory on $node)" ||
    { fail "the claim is '$phase', its directory on '$node': '$dir'"; k describe pvc scratch | tail -8 >&2; }
  k delete pod scratch-user --wait >/dev/null
  k delete pvc scratch --wait >/dev/null
  for _ in $(seq 30); do
    left=$(k get pv -o name; provisioned)
    [ -z "$left" ] && break
    sleep 2
  done
  [ -z "$left" ] && pass "its volume and directory went with the claim" ||
    fail "left after the claim: $(echo "$left" | tr '\n' ' ')"
}

flow_cpu() {
  local ctx=kind-cifartrain k
  k() { kubectl --context "$ctx" "$@"; }
  timed "create-cluster.sh cpu" "$repo/deploy/kind/create-cluster.sh" cpu
  check_default_storage "$ctx" cifartrain
  k apply -f "$repo/deploy/examples/local-volumes.yaml" -f "$repo/deploy/examples/ps-job.yaml"
  k get ctj -w >"$work/watch" 2>&1 &
  local watch=$!
  # Where its pods run, once all of them do.
  local placed=""
  for _ in $(seq 60); do
    placed=$(k get pods -l cifartrain.io/job-name=cifar10-ps --field-selector=status.phase=Running \
      -o jsonpath='{range .items[*]}{.metadata.name}={.spec.nodeName}{"\n"}{end}')
    [ "$(echo "$placed" | grep -c =)" = 5 ] && break
    sleep 5
  done
  echo "$placed"
  local start=$SECONDS state
  state=$(wait_job "$ctx" cifar10-ps 3600)
  times+=("the parameter-server example, submitted to $state: $((SECONDS - start)) s")
  kill "$watch" 2>/dev/null || true
  cat "$work/watch"
  [ "$state" = Succeeded ] && pass "the parameter-server example Succeeded on kind" ||
    { fail "the parameter-server example ended '$state'"; k describe ctj cifar10-ps | tail -20 >&2; }
  [ "$(echo "$placed" | grep -c =)" = 5 ] && pass "its five pods ran" || fail "not all five pods ran: $placed"
  [ "$(echo "$placed" | grep -E 'worker-[01]=' | cut -d= -f2 | sort -u | wc -l)" = 2 ] &&
    pass "its two workers on two nodes" || fail "its workers did not spread over the two workers: $placed"
  [ "$(awk 'NR > 1 && $1 == "cifar10-ps" {print $5}' "$work/watch" | sort -un | wc -l)" -ge 3 ] &&
    pass "kubectl get ctj -w showed its progress" || fail "kubectl get ctj -w showed no progress"
  # The chart out, with the job first (uninstalling the CRD would take the job with it).
  k delete ctj cifar10-ps --wait
  k delete -f "$repo/deploy/examples/local-volumes.yaml" --wait
  "$HELM" --kube-context "$ctx" uninstall cifar-operator --namespace cifartrain-system --wait
  local left=""
  for _ in $(seq 60); do
    left=$(k get all -n cifartrain-system -o name 2>/dev/null)
    [ -z "$left" ] && break
    sleep 2
  done
  [ -z "$left" ] && pass "helm uninstall left nothing in cifartrain-system" ||
    fail "helm uninstall left $(echo "$left" | tr '\n' ' ')"
  # The chart keeps its CRD (and so users' jobs) on uninstall, by design (values.yaml, crds).
  [ "$(k get crd cifartrainjobs.cifartrain.io -o jsonpath='{.metadata.annotations.helm\.sh/resource-policy}')" = keep ] &&
    pass "helm uninstall kept the CRD, as the chart's resource-policy says" ||
    fail "the CRD after helm uninstall is not the kept one of the chart"
  [ -z "$(k get ctj -A -o name)" ] && pass "no job left" || fail "jobs left: $(k get ctj -A -o name)"
  timed "kind delete cluster (cpu)" "$KIND" delete cluster --name cifartrain
}

flow_fake_gpu() {
  local ctx=kind-cifartrain-fake-gpu
  k() { kubectl --context "$ctx" "$@"; }
  # Each worker pod's placement, RuntimeClass, device limit and NVIDIA_VISIBLE_DEVICES while it
  # trains (read from its process, which runs on this kernel).
  (
    for _ in $(seq 720); do
      for pod in $(kubectl --context "$ctx" get pods -l cifartrain.io/job-name=resnet20-gpu-allreduce \
        --field-selector=status.phase=Running -o name 2>/dev/null); do
        kubectl --context "$ctx" get "$pod" -o jsonpath='{.metadata.name} {.spec.nodeName} {.spec.runtimeClassName} {.spec.containers[0].resources.limits.nvidia\.com/gpu}{"\n"}' 2>/dev/null
      done
      for pid in $(pgrep -x cifar-train || true); do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -E '^(NVIDIA_VISIBLE_DEVICES|RANK)=' | sort | paste -sd' ' -
      done
      sleep 5
    done
  ) >"$work/gpu-seen" 2>&1 &
  local watcher=$!
  local start=$SECONDS status=0
  FAKE_GPU_DATA=volume FAKE_GPU_EPOCHS=${FAKE_GPU_EPOCHS:-1} \
    "$repo/deploy/kind/create-cluster.sh" fake-gpu || status=$?
  times+=("create-cluster.sh fake-gpu, its example included: $((SECONDS - start)) s")
  kill "$watcher" 2>/dev/null || true
  [ "$status" = 0 ] && pass "the GPU example Succeeded on fake GPUs" || fail "create-cluster.sh fake-gpu exited $status"
  local gpu_nodes
  gpu_nodes=$(k get nodes -l nvidia.com/gpu.present=true -o jsonpath='{.items[*].metadata.name}')
  sort -u "$work/gpu-seen" | tee "$work/gpu-seen.u"
  for index in 0 1; do
    local line
    line=$(grep "^resnet20-gpu-allreduce-worker-$index " "$work/gpu-seen.u" | head -1)
    set -- $line
    [[ " $gpu_nodes " == *" ${2:-none} "* ]] && [ "${3:-}" = nvidia ] && [ "${4:-}" = 1 ] &&
      pass "worker $index: on GPU worker $2, RuntimeClass nvidia, one nvidia.com/gpu" ||
      fail "worker $index: '$line' (GPU workers: $gpu_nodes)"
  done
  [ "$(grep '^NVIDIA_VISIBLE_DEVICES=[^ ,]* RANK=' "$work/gpu-seen.u" | sed 's/.* RANK=//' | sort -u | wc -l)" = 2 ] &&
    pass "each rank's process saw one device in NVIDIA_VISIBLE_DEVICES" ||
    fail "the trainers' NVIDIA_VISIBLE_DEVICES: $(grep NVIDIA "$work/gpu-seen.u" | tr '\n' ';')"
  timed "kind delete cluster (fake-gpu)" "$KIND" delete cluster --name cifartrain-fake-gpu
}

before=$(machine_state)
network_before=$("$engine" network ls --format '{{.Name}}' | grep -x kind || true)
timed "build-node-image.sh" "$repo/deploy/kind/build-node-image.sh" >/dev/null
for flow in "${flows[@]}"; do
  case $flow in
    cpu) flow_cpu ;;
    fake-gpu) flow_fake_gpu ;;
    *) echo "flows.sh: no flow '$flow' (cpu, fake-gpu)" >&2; exit 2 ;;
  esac
done
# kind keeps its container network after the last cluster (on Docker as on podman): one this run
# made goes too.
[ -n "$network_before" ] || "$engine" network rm kind >/dev/null 2>&1 || true
after=$(machine_state)
if [ "$before" = "$after" ]; then
  pass "the machine is as it was"
else
  fail "the machine is not as it was:"
  diff <(echo "$before") <(echo "$after") >&2 || true
fi
printf 'flows: %s\n' "${times[@]}"
echo "$passes passed, $failures failed"
exit $((failures > 0))
