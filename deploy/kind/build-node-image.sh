#!/usr/bin/env bash
# Builds a kind node image here, for a machine that cannot pull kindest/node: the Kubernetes
# version the local cluster pins (deploy/local-cluster/modules/kubernetes/go.mod), from Debian's
# packages and Go modules only, laid out as kind's own node images are (kind's images/base and
# pkg/build/nodeimage at the kind version deploy/tools/kind/go.mod pins):
# - the base: Debian 12 by mmdebstrap with systemd, runc, iptables/nftables and kind's package
#   list; kind's files/ (its entrypoint, containerd config, kubelet units, /kind/bin scripts) from
#   kind's module; containerd, ctr, the runc shim, crictl and the CNI plugins kind uses, built
#   from the versions node-image/go.mod pins;
# - the node: kubeadm, kubelet and kubectl in /usr/bin, /kind/version, and in containerd's store
#   (namespace k8s.io, pinned, not unpacked: what `kind build node-image` does) the images kubeadm
#   needs, named as `kubeadm config images list` names them, each built here from the same
#   Kubernetes and etcd modules as the local cluster (CoreDNS at kubeadm's version), plus the pause image of kind's
#   containerd config and the default CNI's image.
#   The default storage as kind's: local-path-provisioner (node-image/local-path pins it; a module
#   of its own, since its logrus import path differs from containerd's only in case, which one
#   build refuses) and its helper, node-image/default-storage.yaml.
# Differences from kind's images, each because its source is not to be had here: Debian 12, not
# 13 (13's systemd no longer boots on a cgroup v1 host such as these machines); Debian's runc;
# the default CNI is node-image/podroutes.sh (routes and CNI config, as kindnetd; no policy
# enforcement) since kindnetd's module is not served.
# The image is cached by a key of its inputs (podman's store, and a docker-archive under
# $CIFAR_KIND_CACHE, default ~/.cache/cifartrain/kind): a cached run takes seconds. Cold: about
# 15 minutes on 2 cores (most of it Go builds the local cluster shares). Prints the image's name.
#   deploy/kind/build-node-image.sh     (the image: localhost/cifartrain/kind-node:<version>)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
say() { echo "build-node-image: $*" >&2; }
die() { say "$*"; exit 1; }
for cmd in podman mmdebstrap go gcc jq; do
  command -v "$cmd" >/dev/null || die "$cmd is missing (scripts/install-deps.sh)"
done
source "$repo/scripts/go-build.sh"

kube_version=$(go_mod_pin "$repo/deploy/local-cluster/modules/kubernetes/go.mod" k8s.io/kubernetes)
kind_version=$(go_mod_pin "$repo/deploy/tools/kind/go.mod" sigs.k8s.io/kind)
image=localhost/cifartrain/kind-node:$kube_version
key=$( (echo "$kube_version $kind_version"; cat "$0"; cd "$here/node-image" && find . -type f |
  LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-12)
cache_root=${CIFAR_KIND_CACHE:-$HOME/.cache/cifartrain/kind}
cache=$cache_root/node-$kube_version-$key
# The node's Go tools are cached by their pins alone (editing this script does not rebuild them);
# CoreDNS by its own.
pins_key() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-12; }
tools=$cache_root/tools-$(pins_key "$here/node-image")
coredns_tools=$cache_root/coredns-$(pins_key "$here/node-image/coredns")
local_path_tools=$cache_root/local-path-$(pins_key "$here/node-image/local-path")
label=cifartrain.io/node-image-key

if [ "$(podman image inspect --format "{{index .Labels \"$label\"}}" "$image" 2>/dev/null)" = "$key" ]; then
  echo "$image"
  exit 0
fi
if [ -f "$cache/node.tar" ]; then
  podman load --quiet -i "$cache/node.tar" >/dev/null
  podman tag "localhost/cifartrain/kind-node:$key" "$image"
  echo "$image"
  exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. Binaries: Kubernetes and etcd as the local cluster builds them, plus kubeadm and kubectl;
#    containerd and the node's tools from node-image/go.mod; CoreDNS from node-image/coredns.
say "Kubernetes $kube_version, kind $kind_version's layout"
kube_bin=$("$repo/deploy/local-cluster/build.sh" kind)
require_go "$here/node-image" "the kind node's tools"
go_build "$tools" "$here/node-image" "no_btrfs no_devmapper no_zfs no_aufs" "" \
  github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 sigs.k8s.io/cri-tools/cmd/crictl \
  github.com/containernetworking/plugins/plugins/ipam/host-local \
  github.com/containernetworking/plugins/plugins/main/loopback \
  github.com/containernetworking/plugins/plugins/main/ptp \
  github.com/containernetworking/plugins/plugins/meta/portmap
# CoreDNS at the version kubeadm names (the local cluster's may differ): node-image/coredns pins it.
go_build "$coredns_tools" "$here/node-image/coredns" "grpcnotrace" "" github.com/coredns/coredns
go_build "$local_path_tools" "$here/node-image/local-path" "" "" github.com/rancher/local-path-provisioner
coredns_version=$(go_mod_pin "$here/node-image/coredns/go.mod" github.com/coredns/coredns)
kind_files=$(cd "$work" && GOTOOLCHAIN=local GOFLAGS='' go mod download -json "sigs.k8s.io/kind@$kind_version" |
  jq -r .Dir)/images/base/files
[ -d "$kind_files" ] || die "kind $kind_version's images/base/files is not in its module"

# 2. The images kubeadm and the node need, each a docker-archive in $work/images.
mkdir -p "$work/images"
# image_of NAME CONTEXT: builds CONTEXT's Containerfile as NAME into $work/images.
image_of() {
  podman build --quiet -t "$1" "$2" >/dev/null
  podman save --quiet --format docker-archive -o "$work/images/$(echo "$1" | tr /: __).tar" "$1"
}
# A Debian with iptables, nftables, conntrack and iproute2: kube-proxy's (kube-proxy's own image
# is distroless-iptables) and podroutes'.
net_base=localhost/cifartrain/kind-net-base:$key
if ! podman image exists "$net_base"; then
  mmdebstrap --quiet --variant=minbase --include=iptables,nftables,conntrack,iproute2 \
    --format=tar bookworm "$work/net-base.tar"
  podman import --quiet "$work/net-base.tar" "$net_base" >/dev/null
  rm -f "$work/net-base.tar"
fi
required=$("$kube_bin/kubeadm" config images list --kubernetes-version "$kube_version")
pause_image=$(sed -n 's/^ *sandbox_image = "\(.*\)"/\1/p' "$kind_files/etc/containerd/config.toml")
[ -n "$pause_image" ] || die "no sandbox_image in kind's containerd config"
for name in $required "$pause_image"; do
  component=${name##*/}
  component=${component%%:*}
  context=$work/context-$component
  mkdir -p "$context"
  case $component in
    kube-apiserver|kube-controller-manager|kube-scheduler|etcd)
      # kubeadm's static pods run these by name: a static binary and a PATH.
      cp "$kube_bin/$component" "$context/"
      printf 'FROM scratch\nCOPY %s /usr/local/bin/%s\nENV PATH=/usr/local/bin\n' "$component" "$component" \
        >"$context/Containerfile" ;;
    kube-proxy)
      cp "$kube_bin/kube-proxy" "$context/"
      printf 'FROM %s\nCOPY kube-proxy /usr/local/bin/kube-proxy\n' "$net_base" >"$context/Containerfile" ;;
    coredns)
      [ "${name##*:}" = "$coredns_version" ] ||
        die "kubeadm $kube_version names $name; node-image/coredns/go.mod pins $coredns_version: pin ${name##*:}"
      # kubeadm's CoreDNS Deployment passes only arguments: the image's entrypoint is /coredns.
      cp "$coredns_tools/bin/coredns" "$context/"
      printf 'FROM scratch\nCOPY coredns /coredns\nENTRYPOINT ["/coredns"]\n' >"$context/Containerfile" ;;
    pause) continue ;;
    *) die "kubeadm $kube_version needs $name, which this script does not build" ;;
  esac
  image_of "$name" "$context"
  say "built $name"
done
# The pause image: Kubernetes' pause.c, as the local cluster's, named as kind's containerd config.
"$repo/deploy/local-cluster/build-pause.sh" "$work/pause.tar"
podman load --quiet -i "$work/pause.tar" >/dev/null
podman tag localhost/cifartrain/pause:dev "$pause_image"
podman save --quiet --format docker-archive -o "$work/images/pause.tar" "$pause_image"
# The default CNI.
cni_image=localhost/cifartrain/kind-podroutes:$key
mkdir -p "$work/context-podroutes"
cp "$here/node-image/podroutes.sh" "$kube_bin/kubectl" "$work/context-podroutes/"
printf 'FROM %s\nCOPY kubectl podroutes.sh /usr/local/bin/\n' "$net_base" >"$work/context-podroutes/Containerfile"
image_of "$cni_image" "$work/context-podroutes"
# The default storage: the provisioner, and the helper its pods make and remove directories with.
mkdir -p "$work/context-local-path"
cp "$local_path_tools/bin/local-path-provisioner" "$work/context-local-path/"
printf 'FROM %s\nCOPY local-path-provisioner /usr/local/bin/\n' "$net_base" >"$work/context-local-path/Containerfile"
image_of "localhost/cifartrain/kind-local-path:$key" "$work/context-local-path"
podman tag "$net_base" "localhost/cifartrain/kind-local-path-helper:$key"
podman save --quiet --format docker-archive -o "$work/images/local-path-helper.tar" \
  "localhost/cifartrain/kind-local-path-helper:$key"

# 3. The base: Debian, kind's files and package set-up (its images/base/Dockerfile), the binaries.
say "the node's Debian (mmdebstrap)"
for manifest in default-cni.yaml default-storage.yaml; do
  sed "s/IMAGE_TAG/$key/" "$here/node-image/$manifest" >"$work/$manifest"
done
mmdebstrap --quiet --variant=minbase \
  --include=systemd,systemd-sysv,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,e2fsprogs,bash,ca-certificates,curl,jq,procps,runc \
  --customize-hook="'$here/node-image/customize.sh' \"\$1\" '$kind_files' '$tools/bin' '$kube_bin' '$kube_version' '$work'" \
  --format=tar bookworm "$work/node.tar"

# 4. The image: kind's entrypoint, environment and stop signal.
podman import --quiet \
  --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
  --change 'ENV container=docker' --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL $label=$key" \
  "$work/node.tar" "localhost/cifartrain/kind-node:$key" >/dev/null
podman save --quiet --format docker-archive -o "$cache/node.tar.partial" "localhost/cifartrain/kind-node:$key"
mv "$cache/node.tar.partial" "$cache/node.tar"
podman tag "localhost/cifartrain/kind-node:$key" "$image"
say "built $image ($(du -h "$cache/node.tar" | cut -f1))"
echo "$image"
