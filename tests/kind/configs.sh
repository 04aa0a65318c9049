#!/usr/bin/env bash
# Checks deploy/kind/'s cluster configs with kind's own code (no Docker, no GPU needed): kind's
# loader (strict decoding, defaults) and validation through kind-config-check, the containerd
# patches applied by kind's patch code to the containerd config of kind's node image, and the
# kind CLI itself on the same files (with no container runtime reachable, so it can never create
# a cluster: it stops where it would ask Docker). Then that broken configs are refused with
# kind's errors, and that the RuntimeClass, the configs and the GPU example name the same handler,
# label and class. Exits non-zero on the first failed check.
#   tests/kind/configs.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$("$repo/deploy/tools/build.sh" kind)
check=$bin/kind-config-check
node_config=$bin/../share/kind/containerd-config.toml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# expect_line FILE REGEX WHAT: some line of FILE matches REGEX (extended).
expect_line() { if grep -Eq -- "$2" "$1"; then pass "$3"; else fail "$3 (no line matching '$2' in $(basename "$1"))"; fi; }
no_line() { if grep -Eq -- "$2" "$1"; then fail "$3 (a line matches '$2')"; else pass "$3"; fi; }
# count_lines FILE REGEX N WHAT: exactly N lines of FILE match REGEX.
count_lines() {
  local n
  n=$(grep -Ec -- "$2" "$1" || true)
  if [ "$n" = "$3" ]; then pass "$4"; else fail "$4 ($n lines match '$2', not $3)"; fi
}
# kind_cli ARGS...: the kind CLI with no docker/podman/nerdctl to find, output to $tmp/cli.out.
kind_cli() { env PATH=/nonexistent HOME="$tmp" "$bin/kind" "$@" >"$tmp/cli.out" 2>&1; }

# --- the kind pinned in deploy/tools/kind/go.mod is the kind this checks with
# shellcheck source=../../scripts/go-build.sh
source "$repo/scripts/go-build.sh"
pinned=$(go_mod_pin "$repo/deploy/tools/kind/go.mod" sigs.k8s.io/kind)
"$bin/kind" version >"$tmp/version"
expect_line "$tmp/version" "^kind $pinned " "kind CLI is the pinned $pinned"

# --- CPU: one control plane, two workers, kind's default node image, the data mount
cpu=$repo/deploy/kind/cluster-cpu.yaml
"$check" --name cifartrain "$cpu" >"$tmp/cpu.out" || { cat "$tmp/cpu.out"; fail "kind rejects cluster-cpu.yaml"; }
cat "$tmp/cpu.out"
default_image=$(sed -n 's/^cluster name=.* kind-default-image=//p' "$tmp/cpu.out")
count_lines "$tmp/cpu.out" "^node [0-9]+ role=control-plane " 1 "cpu: one control plane"
count_lines "$tmp/cpu.out" "^node [0-9]+ role=worker " 2 "cpu: two workers"
no_line "$tmp/cpu.out" "^node [0-9]+ role=.* image=($|[^k]|k[^i])" "cpu: every node names an image"
if [ -n "$default_image" ] && ! grep '^node [0-9]* role=' "$tmp/cpu.out" | grep -qv " image=$default_image\$"; then
  pass "cpu: every node runs kind $pinned's default node image ($default_image)"
else
  fail "cpu: a node's image differs from kind $pinned's default '$default_image' (bump the pin and the configs together)"
fi
cpu_workers=$(sed -n 's/^node \([0-9]*\) role=worker .*/\1/p' "$tmp/cpu.out")
for i in $cpu_workers; do
  expect_line "$tmp/cpu.out" "^node $i mount /srv/cifartrain:/srv/cifartrain " "cpu: worker $i sees /srv/cifartrain (local-volumes.yaml)"
done
expect_line "$tmp/cpu.out" "^containerd patches=0 json6902=0$" "cpu: containerd left as the node image has it"
kind_cli create cluster --name cifartrain --config "$cpu" || true
expect_line "$tmp/cli.out" "failed to get docker info" "cpu: the kind CLI loads cluster-cpu.yaml (and stops at Docker)"

# --- GPU: the device mount and label on every worker, the containerd handler after kind's patch
gpu=$repo/deploy/kind/cluster-gpu.yaml
"$check" --name cifartrain-gpu --containerd-config "$node_config" "$gpu" >"$tmp/gpu.out" ||
  { cat "$tmp/gpu.out"; fail "kind rejects cluster-gpu.yaml"; }
cat "$tmp/gpu.out"
count_lines "$tmp/gpu.out" "^node [0-9]+ role=control-plane " 1 "gpu: one control plane"
count_lines "$tmp/gpu.out" "^node [0-9]+ role=worker " 2 "gpu: two workers"
gpu_workers=$(sed -n 's/^node \([0-9]*\) role=worker .*/\1/p' "$tmp/gpu.out")
if [ -n "$default_image" ] && ! grep '^node [0-9]* role=' "$tmp/gpu.out" | grep -qv " image=$default_image\$"; then
  pass "gpu: every node runs kind's default node image"
else
  fail "gpu: a node's image differs from kind $pinned's default '$default_image'"
fi
for i in $gpu_workers; do
  expect_line "$tmp/gpu.out" "^node $i mount /dev/null:/var/run/nvidia-container-devices/all readonly=false " \
    "gpu: worker $i mounts /dev/null at /var/run/nvidia-container-devices/all (the host runtime injects every GPU)"
  expect_line "$tmp/gpu.out" "^node $i label nvidia.com/gpu.present=true$" "gpu: worker $i labelled nvidia.com/gpu.present=true"
done
cp_index=$(sed -n 's/^node \([0-9]*\) role=control-plane .*/\1/p' "$tmp/gpu.out")
no_line "$tmp/gpu.out" "^node $cp_index (mount /dev/null:|label nvidia)" "gpu: the control plane gets no GPU"
expect_line "$tmp/gpu.out" "^containerd patches=2 " "gpu: two containerd patches (config versions 2 and 3)"
# kind v0.33.0's node image has a version 2 containerd config: the version 2 patch applies, the
# version 3 one is skipped by kind (a v3 plugin section in a v2 config would be wrong).
expect_line "$tmp/gpu.out" "^containerd version=2 plugin=io.containerd.grpc.v1.cri$" "gpu: node image's containerd config is version 2"
expect_line "$tmp/gpu.out" "^containerd plugins io.containerd.grpc.v1.cri$" "gpu: kind skipped the version 3 patch"
expect_line "$tmp/gpu.out" "^containerd runtime nvidia runtime_type=io.containerd.runc.v2 BinaryName=/usr/bin/nvidia-container-runtime " \
  "gpu: containerd handler nvidia runs runc through nvidia-container-runtime"
runc_line=$(sed -n 's/^containerd runtime runc runtime_type=\([^ ]*\) BinaryName=[^ ]* \(.*\)/\1 \2/p' "$tmp/gpu.out")
nvidia_line=$(sed -n 's/^containerd runtime nvidia runtime_type=\([^ ]*\) BinaryName=[^ ]* \(.*\)/\1 \2/p' "$tmp/gpu.out")
if [ -n "$runc_line" ] && [ "$runc_line" = "$nvidia_line" ]; then
  pass "gpu: handler nvidia has runc's runtime type, cgroup driver and base spec ($runc_line)"
else
  fail "gpu: handler nvidia differs from kind's runc: '$nvidia_line' vs '$runc_line' (the kubelet's cgroup driver is systemd)"
fi
expect_line "$tmp/gpu.out" "^containerd default_runtime_name=runc$" "gpu: runc stays the default (control plane, CPU pods)"
kind_cli create cluster --name cifartrain-gpu --config "$gpu" || true
expect_line "$tmp/cli.out" "failed to get docker info" "gpu: the kind CLI loads cluster-gpu.yaml (and stops at Docker)"

# --- the names that must agree across the files
runtime_class=$repo/deploy/kind/nvidia-runtimeclass.yaml
job=$repo/deploy/examples/gpu-allreduce-job.yaml
handler=$(awk '$1 == "handler:" {print $2}' "$runtime_class")
class=$(awk '$1 == "kind:" {k = $2} k == "RuntimeClass" && $1 == "name:" {print $2; exit}' "$runtime_class")
[ -n "$handler" ] || fail "no handler in nvidia-runtimeclass.yaml"
expect_line "$tmp/gpu.out" "^containerd runtime $handler " "RuntimeClass handler '$handler' is a containerd runtime of cluster-gpu.yaml"
expect_line "$runtime_class" '^  nodeSelector: \{nvidia.com/gpu.present: "true"\}$' "RuntimeClass schedules onto the GPU workers' label"
expect_line "$job" "^ +runtimeClassName: $class\$" "gpu-allreduce-job.yaml uses RuntimeClass $class"
expect_line "$job" "^ +limits: \{nvidia.com/gpu: 1\}$" "gpu-allreduce-job.yaml: one GPU per worker"
expect_line "$job" "^ +allReduce: \{backend: nccl\}$" "gpu-allreduce-job.yaml: NCCL"
expect_line "$job" "^  image: localhost/cifartrain/runtime-gpu:dev$" "gpu-allreduce-job.yaml: the runtime-gpu image"

# --- broken configs are refused, with kind's own messages
# refused NAME EXPECTED [loader]: kind-config-check rejects $tmp/NAME.yaml with a message
# containing EXPECTED. With `loader`, the kind CLI does too; otherwise (a validation error) the
# CLI gets past loading it and stops at Docker: kind validates only after asking the runtime.
refused() {
  local file=$tmp/$1.yaml
  if "$check" --containerd-config "$node_config" "$file" >"$tmp/$1.out" 2>&1; then
    fail "$1: kind-config-check accepted it"
  elif grep -qF -- "$2" "$tmp/$1.out"; then
    pass "$1: refused: $(tr '\n' ' ' <"$tmp/$1.out")"
  else
    fail "$1: refused without '$2': $(cat "$tmp/$1.out")"
  fi
  kind_cli create cluster --name broken --config "$file" || true
  if [ "${3:-}" = loader ]; then
    if grep -qF -- "$2" "$tmp/cli.out"; then pass "$1: the kind CLI refuses it too"; else fail "$1: the kind CLI says: $(cat "$tmp/cli.out")"; fi
  else
    expect_line "$tmp/cli.out" "failed to get docker info" "$1: the kind CLI loads it (validation comes after Docker)"
  fi
}
# an unknown field (strict decoding): `gpus: all` is nvkind's template value, not a kind field
sed 's|^  labels: {nvidia.com/gpu.present: "true"}|&\n  gpus: all|' "$gpu" >"$tmp/unknown-field.yaml"
refused unknown-field "field gpus not found in type v1alpha4.Node" loader
# a role kind does not know (validation)
sed '0,/^- role: worker/s//- role: gpu-worker/' "$gpu" >"$tmp/bad-role.yaml"
refused bad-role '"gpu-worker" is not a valid node role'
# no control plane (validation)
sed '/^- role: control-plane/,+1d' "$cpu" >"$tmp/no-control-plane.yaml"
refused no-control-plane "must have at least one control-plane node"
# a wrong apiVersion
sed 's|^apiVersion: kind.x-k8s.io/v1alpha4|apiVersion: kind.x-k8s.io/v1alpha3|' "$cpu" >"$tmp/old-api.yaml"
refused old-api "unknown apiVersion: kind.x-k8s.io/v1alpha3" loader
# a containerd patch that is not TOML: kind's patch code refuses it (checker only: the CLI would
# patch on the nodes, after Docker)
cat >"$tmp/bad-patch.yaml" <<'EOF'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
containerdConfigPatches:
- |-
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia
EOF
if "$check" --containerd-config "$node_config" "$tmp/bad-patch.yaml" >"$tmp/bad-patch.out" 2>&1; then
  fail "bad-patch: kind's patch code accepted a patch that is not TOML"
else
  expect_line "$tmp/bad-patch.out" "kind cannot patch the node image's containerd config" "bad-patch: refused by kind's patch code"
fi

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all kind config checks passed"
