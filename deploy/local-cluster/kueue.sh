#!/usr/bin/env bash
# Kueue on the local cluster that start.sh started in DIR, installed as its users install it: from
# its own release manifests (config/default of the pinned module, rendered with kubectl's
# kustomize: CRDs, RBAC, the controller manager's Deployment in kueue-system with its pod
# integration, its webhooks and their self-made certificates), the manager built from its Go
# module (build-kueue.sh, cached) and made into an image of that one static binary, loaded into
# every node (no registry). Then it waits until Kueue's webhook takes pods.
#   deploy/local-cluster/kueue.sh DIR
# What differs from a release install, and why:
# - the image is the local one (imagePullPolicy Never), and the manager runs on node 1, the
#   machine itself, so that killing another node never takes it along;
# - its CPU request is 100m instead of 500m: the nodes here have two cores for everything;
# - no visibility API (VisibilityOnDemand off, its APIServices left out): the local API server has
#   no aggregation layer (front-proxy certificates), and an APIService that cannot be reached
#   breaks API discovery for every client (Helm, kubectl).
# shellcheck disable=SC2154 # images, nodes: cluster.env's
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(cd "${1:?usage: kueue.sh DIR}" && pwd)
# shellcheck source=/dev/null
source "$dir/cluster.env"  # images, nodes
log_dir=$dir/logs
# shellcheck source=lib.sh
source "$here/lib.sh"
kubectl=(kubectl --kubeconfig "$dir/kubeconfig")

# shellcheck source=../../scripts/go-build.sh
source "$here/../../scripts/go-build.sh"
version=$(go_mod_pin "$here/modules/kueue/go.mod" sigs.k8s.io/kueue)
bin=$("$here/build-kueue.sh")
image=localhost/kueue/kueue:$version

# The image: the static manager alone, as Kueue's own (distroless) runs it: /manager, UID 65532.
tar=$images/kueue-$version.tar
if [ ! -f "$tar" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp "$bin/manager" "$work/manager"
  printf 'FROM scratch\nCOPY manager /manager\nUSER 65532:65532\nENTRYPOINT ["/manager"]\n' >"$work/Containerfile"
  podman build --quiet -t "$image" "$work" >/dev/null
  podman save --quiet --format docker-archive -o "$tar.partial" "$image"
  mv "$tar.partial" "$tar"
fi
for i in $(seq "$nodes"); do "$here/node.sh" import "$dir" "$i" "$tar"; done

# Kueue's release manifests with the changes above.
module=$(cd "$here/modules/kueue" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kueue@$version" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
overlay=$dir/kueue
rm -rf "$overlay" && mkdir -p "$overlay"
cp -r "$module/config" "$overlay/config"  # the module cache is read-only; kustomize reads it here
chmod -R u+w "$overlay/config"
node1=$("$here/node.sh" name "$dir" 1)
cat >"$overlay/kustomization.yaml" <<KUSTOMIZATION
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- config/default
images:
- name: us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue
  newName: localhost/kueue/kueue
  newTag: $version
patches:
- target: {kind: Deployment, name: kueue-controller-manager}
  patch: |-
    - {op: replace, path: /spec/template/spec/containers/0/imagePullPolicy, value: Never}
    - {op: add, path: /spec/template/spec/nodeSelector, value: {kubernetes.io/hostname: $node1}}
    - {op: replace, path: /spec/template/spec/containers/0/resources/requests/cpu, value: 100m}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --feature-gates=VisibilityOnDemand=false}
- target: {kind: APIService}
  patch: |-
    \$patch: delete
    apiVersion: apiregistration.k8s.io/v1
    kind: APIService
    metadata: {name: any}
KUSTOMIZATION
"${kubectl[@]}" kustomize "$overlay" >"$overlay/kueue.yaml"
if ! "${kubectl[@]}" apply --server-side -f "$overlay/kueue.yaml" >>"$log_dir/kueue.log" 2>&1; then
  echo "kueue.sh: applying Kueue's manifests failed:" >&2
  tail -20 "$log_dir/kueue.log" >&2
  exit 1
fi

# Ready when its webhook takes a pod of a queue (a server-side dry run: nothing is made). Its
# certificates are its own (internal cert management), written to a Secret that the kubelet then
# mounts into the pod.
probe=$overlay/probe-pod.yaml
cat >"$probe" <<'POD'
apiVersion: v1
kind: Pod
metadata:
  name: kueue-webhook-probe
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: probe}
spec:
  containers: [{name: probe, image: localhost/cifartrain/pause:dev}]
POD
webhook_takes_pods() {
  "${kubectl[@]}" create --dry-run=server -o jsonpath='{.metadata.labels.kueue\.x-k8s\.io/managed}' \
    -f "$probe" 2>>"$log_dir/kueue.log" | grep -qx true
}
for _ in $(seq 150); do
  webhook_takes_pods && exit 0
  sleep 2
done
echo "kueue.sh: Kueue's webhook did not take pods within 300 s:" >&2
"${kubectl[@]}" -n kueue-system get pods -o wide >&2 || true
"${kubectl[@]}" -n kueue-system logs deployment/kueue-controller-manager --tail=30 >&2 || true
exit 1
