#!/usr/bin/env bash
# Creates a kind cluster for cifartrain and runs the operator on it.
#   cpu: cluster-cpu.yaml (a control plane, two workers); loads the runtime and operator images,
#        installs the operator; then deploy/examples/ps-job.yaml can run (data: local-volumes.yaml).
#   gpu: cluster-gpu.yaml (two workers with the host's GPUs); checks the host's NVIDIA set-up,
#        installs NVIDIA's container toolkit into the GPU workers, the RuntimeClass `nvidia` and
#        NVIDIA's device plugin; loads the images (runtime-gpu too), installs the operator, submits
#        deploy/examples/gpu-allreduce-job.yaml and waits for it to end.
#   fake-gpu: the same cluster on a machine without GPUs (CI): no host checks, no toolkit (the
#        `nvidia` handler runs plain runc), and instead of NVIDIA's device plugin the local
#        cluster's fake one (deploy/local-cluster/fake-gpu-plugin: its image, built here, as a
#        DaemonSet) advertises FAKE_GPUS nvidia.com/gpu per worker that are not there. The example
#        runs as it is but on gloo and the CPU (training.device: cpu, the runtime image): its
#        placement, RuntimeClass, tolerations and device allocation are real, its CUDA is not.
# Needs kind, kubectl, helm and a container engine for kind's nodes: Docker when its daemon answers
# (gpu needs it: README "kind with GPUs" lists what the host needs), else podman (kind's podman
# provider). The node image is the one the config pins when the engine has it or can pull it, else
# one built here by build-node-image.sh (Kubernetes at the local cluster's version, from Debian's
# packages and Go modules): the script says which it used. On a podman host it also makes what
# kind's podman provider assumes (/lib/modules, which it mounts, and ulimits the engine may set).
# A cluster of that name that already exists is reused.
#   deploy/kind/create-cluster.sh cpu|gpu|fake-gpu
# Environment:
#   CLUSTER_NAME          default cifartrain (cpu) or cifartrain-<mode>
#   KIND_NODE_IMAGE       the node image: a name, or `build` for build-node-image.sh's (default:
#                         the config's, else built here when it cannot be pulled)
#   KIND_EXPERIMENTAL_PROVIDER  docker or podman (default: docker when its daemon answers)
#   KIND, HELM            the kind and helm binaries (default: on PATH, else the pinned ones that
#                         deploy/tools/build.sh kind|helm builds, with Go)
#   CIFAR_IMAGE_CACHE     where scripts/build-images.sh left its tars (default ~/.cache/cifartrain/images)
#   NVIDIA_CTK_VERSION    NVIDIA container toolkit installed in the GPU workers (default 1.19.0-1)
#   DEVICE_PLUGIN_VERSION NVIDIA device plugin chart (default 0.18.2)
#   JOB_TIMEOUT           seconds to wait for the GPU example job (default 1800)
#   FAKE_GPUS             fake-gpu: nvidia.com/gpu per GPU worker (default 4)
#   FAKE_GPU_DATA         fake-gpu: download (default, as the example) or volume (CIFAR-10 from
#                         /srv/cifartrain through deploy/examples/local-volumes.yaml: no internet)
#   FAKE_GPU_EPOCHS       fake-gpu: the example's epochs instead of its 5
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mode=${1:-}
case $mode in
  cpu|gpu|fake-gpu) ;;
  *) echo "usage: create-cluster.sh cpu|gpu|fake-gpu" >&2; exit 2 ;;
esac
default_name=cifartrain-$mode
[ "$mode" = cpu ] && default_name=cifartrain
name=${CLUSTER_NAME:-$default_name}
images=${CIFAR_IMAGE_CACHE:-$HOME/.cache/cifartrain/images}
ctk_version=${NVIDIA_CTK_VERSION:-1.19.0-1}
plugin_version=${DEVICE_PLUGIN_VERSION:-0.18.2}
job_timeout=${JOB_TIMEOUT:-1800}
fake_gpus=${FAKE_GPUS:-4}
job=resnet20-gpu-allreduce  # metadata.name in deploy/examples/gpu-allreduce-job.yaml

say() { echo "create-cluster: $*" >&2; }
die() { say "$*"; exit 1; }

command -v kubectl >/dev/null || die "kubectl is missing (README: kind with GPUs, prerequisites)"
# The engine kind runs the nodes in.
provider=${KIND_EXPERIMENTAL_PROVIDER:-}
if [ -z "$provider" ]; then
  provider=podman
  command -v docker >/dev/null && docker info >/dev/null 2>&1 && provider=docker
fi
case $provider in
  docker) docker info >/dev/null 2>&1 || die "the Docker daemon does not answer (docker info)" ;;
  podman)
    command -v podman >/dev/null ||
      die "no container engine: neither a Docker daemon (docker info) nor podman (README: kind with GPUs, prerequisites)"
    [ "$mode" != gpu ] || die "gpu needs Docker with NVIDIA's runtime (nvkind's set-up); this host has podman only"
    export KIND_EXPERIMENTAL_PROVIDER=podman ;;
  *) die "KIND_EXPERIMENTAL_PROVIDER=$provider: kind's providers here are docker and podman" ;;
esac
engine() { "$provider" "$@"; }
# tool NAME: NAME on PATH, else the version the repository pins, built by deploy/tools/build.sh.
tool() {
  command -v "$1" && return
  if [ ! -f "$repo/deploy/tools/$1/go.mod" ] || ! command -v go >/dev/null; then
    die "$1 is missing (README: kind with GPUs, prerequisites)"
  fi
  say "no $1 on PATH: building the pinned one (deploy/tools/build.sh $1)"
  echo "$("$repo/deploy/tools/build.sh" "$1")/$1"
}
kind=${KIND:-$(tool kind)}
helm=${HELM:-$(tool helm)}
say "$("$kind" version), nodes in $provider"
# Every command names the cluster's context: the user's current context may change meanwhile.
k() { kubectl --context "kind-$name" "$@"; }

if [ "$mode" = gpu ]; then
  # What nvkind requires of the host: a working driver, Docker's default runtime the NVIDIA one,
  # and the runtime reading the GPUs to inject from volume mounts (cluster-gpu.yaml's /dev/null
  # mounts).
  nvidia-smi -L >/dev/null 2>&1 || die "nvidia-smi -L fails: install the NVIDIA driver first"
  [ "$(docker info --format '{{.DefaultRuntime}}')" = nvidia ] ||
    die "Docker's default runtime is not nvidia: sudo nvidia-ctk runtime configure --runtime=docker --set-as-default && sudo systemctl restart docker"
  grep -Eq '^[[:space:]]*accept-nvidia-visible-devices-as-volume-mounts[[:space:]]*=[[:space:]]*true' \
    /etc/nvidia-container-runtime/config.toml 2>/dev/null ||
    die "the NVIDIA runtime ignores volume-mounted devices: sudo nvidia-ctk config --set accept-nvidia-visible-devices-as-volume-mounts=true --in-place && sudo systemctl restart docker"
fi

if "$kind" get clusters 2>/dev/null | grep -qx "$name"; then
  say "cluster $name exists: reusing it"
else
  config=$here/cluster-$mode.yaml
  [ "$mode" = fake-gpu ] && config=$here/cluster-gpu.yaml  # its /dev/null mounts inject nothing here
  # The node image: the config's pinned one if the engine has it or can pull it, else built here.
  pinned=$(sed -n 's/^ *image: *//p' "$config" | head -1)
  # podman resolves no short names: kind's podman provider pulls kindest/node from docker.io.
  [ "$provider" = podman ] && [[ ${pinned%%/*} != *.* ]] && pinned=docker.io/$pinned
  node_image=${KIND_NODE_IMAGE:-}
  if [ -z "$node_image" ] && ! engine image inspect "$pinned" >/dev/null 2>&1; then
    say "pulling $pinned"
    timeout 300 "$provider" pull "$pinned" >&2 || node_image=build
  fi
  if [ "$node_image" = build ]; then
    say "the node image built here (deploy/kind/build-node-image.sh; cached once built)"
    node_image=$("$here/build-node-image.sh")
  fi
  image_flag=()
  if [ -n "$node_image" ]; then
    say "node image: $node_image (instead of $pinned)"
    image_flag=(--image "$node_image")
  else
    say "node image: $pinned"
    node_image=$pinned
  fi
  # The workers mount /srv/cifartrain (the examples' data); podman, unlike Docker, does not create it.
  mkdir -p /srv/cifartrain
  if [ "$provider" = podman ]; then
    # kind's podman provider mounts /lib/modules read-only into every node: a kernel built without
    # modules (these VMs) has none.
    [ -d /lib/modules ] || mkdir -p /lib/modules || die "kind (podman) mounts /lib/modules: sudo mkdir -p /lib/modules"
    # kind's nodes find the control plane by name: podman's network `kind` must resolve names
    # (with the CNI backend, the dnsname plugin). One made without it (the plugin installed since)
    # is made again by kind once removed, if no container uses it.
    if [ "$(podman info --format '{{.Host.NetworkBackend}}')" = cni ] &&
      ! [ -x /usr/lib/cni/dnsname ] && ! [ -x /opt/cni/bin/dnsname ]; then
      die "podman's CNI backend lacks the dnsname plugin, without which kind's nodes cannot find each other: apt-get install golang-github-containernetworking-plugin-dnsname"
    fi
    if [ "$(podman network inspect kind --format '{{.DNSEnabled}}' 2>/dev/null)" = false ]; then
      podman network rm kind >/dev/null ||
        die "podman's network kind resolves no names and is in use: remove its containers and it (podman network rm kind)"
      say "removed podman's network kind, made without name resolution: kind makes it again"
    fi
    # Rootful podman raises a container's open-files and processes limits above the host's hard
    # ones, which a host without CAP_SYS_RESOURCE refuses ("error setting rlimit"): give podman
    # the host's own limits (podman itself lowers its processes limit to 32768).
    if ! podman run --rm --privileged --entrypoint true "$node_image" >/dev/null 2>&1; then
      conf=$(mktemp)
      nproc=$(ulimit -Hu)
      [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
      printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' \
        "$(ulimit -Hn)" "$(ulimit -Hn)" "$nproc" "$nproc" >"$conf"
      export CONTAINERS_CONF=$conf
      podman run --rm --privileged --entrypoint true "$node_image" >/dev/null ||
        die "podman cannot run $node_image (above), even with the host's ulimits ($conf)"
      say "podman: the nodes get the host's ulimits ($(tr '\n' ' ' <"$conf"))"
    fi
  fi
  "$kind" create cluster --name "$name" --config "$config" "${image_flag[@]}" --wait 5m
fi
workers=$("$kind" get nodes --name "$name" | grep -v -- '-control-plane$' | sort | paste -sd, -)
[ -n "$workers" ] || die "cluster $name has no workers"

if [ "$mode" != cpu ]; then
  gpu_nodes=$(k get nodes -l nvidia.com/gpu.present=true -o jsonpath='{.items[*].metadata.name}')
  [ -n "$gpu_nodes" ] || die "no node is labelled nvidia.com/gpu.present=true (cluster-gpu.yaml)"
  for node in $gpu_nodes; do
    if [ "$mode" = fake-gpu ]; then
      # The handler `nvidia` of cluster-gpu.yaml runs /usr/bin/nvidia-container-runtime: here
      # runc itself, as there is no GPU to inject.
      engine exec "$node" sh -c 'ln -sf "$(command -v runc)" /usr/bin/nvidia-container-runtime'
      continue
    fi
    # The host's runtime put the GPUs and the driver's tools into the node container, or not.
    docker exec "$node" nvidia-smi -L >&2 ||
      die "$node sees no GPU: check the host set-up (README: kind with GPUs) and recreate the cluster"
    # The runtime behind the containerd handler `nvidia` that cluster-gpu.yaml configures; the
    # node image lacks it. (containerd finds the binary when it starts a container: no restart.)
    if ! docker exec "$node" test -x /usr/bin/nvidia-container-runtime; then
      say "$node: installing nvidia-container-toolkit $ctk_version"
      docker exec -e "V=$ctk_version" "$node" bash -euo pipefail -c '
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q && apt-get install -qy gpg curl
        curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey |
          gpg --dearmor --yes -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
        echo "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/\$(ARCH) /" \
          >/etc/apt/sources.list.d/nvidia-container-toolkit.list
        apt-get update -q
        apt-get install -qy nvidia-container-toolkit="$V" nvidia-container-toolkit-base="$V" \
          libnvidia-container-tools="$V" libnvidia-container1="$V"' >&2
    fi
  done
  k apply -f "$here/nvidia-runtimeclass.yaml"
  if [ "$mode" = gpu ]; then
    # NVIDIA's device plugin chart at a pinned version: its pods run under the nvidia handler (to
    # see the GPUs through NVML) and, by the chart's own node affinity, only on nodes labelled
    # nvidia.com/gpu.present=true.
    "$helm" --kube-context "kind-$name" upgrade --install nvidia-device-plugin nvidia-device-plugin \
      --repo https://nvidia.github.io/k8s-device-plugin --version "$plugin_version" \
      --namespace nvidia-device-plugin --create-namespace --set runtimeClassName=nvidia --wait --timeout 5m
    plugin_logs="-n nvidia-device-plugin logs -l app.kubernetes.io/name=nvidia-device-plugin"
  else
    # The local cluster's fake device plugin, its image built here, as a DaemonSet on the GPU nodes.
    plugin_tar=$images/fake-gpu-plugin.tar
    "$repo/deploy/local-cluster/build-fake-gpu-plugin.sh" --image "$plugin_tar" >/dev/null
    "$kind" load image-archive "$plugin_tar" --name "$name" --nodes "$(echo "$gpu_nodes" | tr ' ' ,)"
    sed "s/{name: FAKE_GPUS, value: \"[0-9]*\"}/{name: FAKE_GPUS, value: \"$fake_gpus\"}/" \
      "$repo/deploy/local-cluster/fake-gpu-plugin/daemonset.yaml" | k apply -f -
    plugin_logs="-n kube-system logs -l app.kubernetes.io/name=fake-gpu-plugin"
  fi
  for node in $gpu_nodes; do
    for _ in $(seq 60); do
      gpus=$(k get node "$node" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')
      [ "${gpus:-0}" -gt 0 ] && break
      sleep 2
    done
    [ "${gpus:-0}" -gt 0 ] || die "$node advertises no nvidia.com/gpu: kubectl --context kind-$name $plugin_logs"
    say "$node: $gpus allocatable nvidia.com/gpu"
  done
fi

# The images, from this machine's Docker, else from scripts/build-images.sh's tars, else built
# here: with Docker (the Dockerfile's targets; runtime-gpu: ~3 GB of wheels and a CUDA compile), or
# with podman by scripts/build-images.sh (which compiles in the image: tens of minutes).
targets=(operator runtime)
[ "$mode" = gpu ] && targets+=(runtime-gpu)
for target in "${targets[@]}"; do
  tag=localhost/cifartrain/$target:dev
  if [ "$provider" = docker ] && docker image inspect "$tag" >/dev/null 2>&1; then
    "$kind" load docker-image "$tag" --name "$name" --nodes "$workers"
    continue
  fi
  if [ ! -f "$images/$target.tar" ]; then
    if [ "$provider" = docker ]; then
      say "building $tag with Docker"
      docker build --target "$target" -t "$tag" "$repo"
      "$kind" load docker-image "$tag" --name "$name" --nodes "$workers"
      continue
    fi
    say "building $tag with podman (scripts/build-images.sh $target)"
    "$repo/scripts/build-images.sh" --out "$images" "$target"
  fi
  "$kind" load image-archive "$images/$target.tar" --name "$name" --nodes "$workers"
done

# The operator and its CRD, with the chart (README, "Install with Helm"), from the loaded image.
"$helm" --kube-context "kind-$name" upgrade --install cifar-operator "$repo/deploy/helm/cifar-operator" \
  --namespace cifartrain-system --create-namespace \
  --set image.repository=localhost/cifartrain/operator --set image.tag=dev \
  --set image.pullPolicy=IfNotPresent --wait --timeout 5m
# The chart's own test: a pod that reaches the operator's metrics through its Service.
"$helm" --kube-context "kind-$name" test cifar-operator --namespace cifartrain-system --timeout 3m

if [ "$mode" = cpu ]; then
  say "ready: kubectl --context kind-$name get nodes. The parameter-server example reads CIFAR-10"
  say "from /srv/cifartrain on this machine (the workers mount it):"
  say "  sudo mkdir -p /srv/cifartrain/cifar10 /srv/cifartrain/checkpoints && sudo chmod 777 /srv/cifartrain/checkpoints"
  say "  curl -fsSL https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz | sudo tar -xz -C /srv/cifartrain/cifar10"
  say "  kubectl --context kind-$name apply -f deploy/examples/local-volumes.yaml -f deploy/examples/ps-job.yaml"
  exit 0
fi

if [ "$mode" = fake-gpu ]; then
  # The example on the CPU: gloo instead of NCCL, the runtime image, training.device cpu. With
  # FAKE_GPU_DATA=volume, CIFAR-10 from /srv/cifartrain (deploy/examples/local-volumes.yaml, as for
  # the cpu example) instead of a download; FAKE_GPU_EPOCHS replaces its epochs.
  edits=(-e 's|runtime-gpu:dev|runtime:dev|' -e 's|backend: nccl|backend: gloo|'
    -e 's|^  training:$|  training:\n    device: cpu|')
  case ${FAKE_GPU_DATA:-download} in
    download) ;;
    volume)
      k apply -f "$repo/deploy/examples/local-volumes.yaml"
      edits+=(-e 's|^    download: {}$|    volume: {claimName: cifar10}|') ;;
    *) die "FAKE_GPU_DATA=$FAKE_GPU_DATA: download or volume" ;;
  esac
  if [ -n "${FAKE_GPU_EPOCHS:-}" ]; then
    [[ $FAKE_GPU_EPOCHS =~ ^[1-9][0-9]*$ ]] || die "FAKE_GPU_EPOCHS=$FAKE_GPU_EPOCHS: a whole number of epochs, 1 or more"
    edits+=(-e "s|^    epochs: [0-9]*$|    epochs: $FAKE_GPU_EPOCHS|")
  fi
  sed "${edits[@]}" "$repo/deploy/examples/gpu-allreduce-job.yaml" | k apply -f -
else
  k apply -f "$repo/deploy/examples/gpu-allreduce-job.yaml"
fi
say "submitted $job; waiting up to $job_timeout s for it to end (kubectl --context kind-$name get ctj -w)"
deadline=$((SECONDS + job_timeout))
state=""
while ((SECONDS < deadline)); do
  state=$(k get ctj "$job" -o jsonpath='{.status.state}')
  case $state in
    Succeeded|Failed) break ;;
  esac
  sleep 10
done
k get ctj "$job"
if [ "$state" != Succeeded ]; then
  k describe ctj "$job" >&2
  k logs -l "cifartrain.io/job-name=$job" --tail 30 --prefix >&2 || true
  die "$job ended as '${state:-unknown}'"
fi
k logs "$job-worker-0" --tail 5 >&2
say "$job succeeded on the GPU workers"
