#!/usr/bin/env bash
# build-node-image.sh's mmdebstrap hook: turns the Debian in ROOTFS into a kind node, as kind's
# images/base/Dockerfile and `kind build node-image` do.
#   customize.sh ROOTFS KIND_FILES NODE_BIN KUBE_BIN KUBE_VERSION WORK
# KIND_FILES: kind's images/base/files; NODE_BIN: containerd, ctr, the shim, crictl and the CNI
# plugins; KUBE_BIN: kubeadm, kubelet, kubectl; WORK: images/*.tar (docker-archives to preload)
# and the default CNI's and storage's manifests.
set -euo pipefail
rootfs=$1 kind_files=$2 node_bin=$3 kube_bin=$4 kube_version=$5 work=$6

# kind's files: its entrypoint and clean-install, /kind, /etc (containerd, kubelet units, sysctls).
cp -r "$kind_files/usr/local/bin/." "$rootfs/usr/local/bin/"
mkdir -p "$rootfs/kind/bin" "$rootfs/kind/manifests" "$rootfs/etc/kubernetes/manifests" "$rootfs/opt/cni/bin"
cp -r "$kind_files/kind/." "$rootfs/kind/"
cp -r "$kind_files/etc/." "$rootfs/etc/"
chmod 0755 "$rootfs"/usr/local/bin/* "$rootfs"/kind/bin/*
# containerd's base runtime spec, as kind's Dockerfile derives it.
"$node_bin/ctr" oci spec |
  jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
  jq 'del(.process.rlimits)' >"$rootfs/etc/containerd/cri-base.json"
cp "$node_bin/containerd" "$node_bin/ctr" "$node_bin/containerd-shim-runc-v2" "$node_bin/crictl" "$rootfs/usr/local/bin/"
cp "$node_bin/host-local" "$node_bin/loopback" "$node_bin/ptp" "$node_bin/portmap" "$rootfs/opt/cni/bin/"
# kind's node image: the Kubernetes binaries in /usr/bin, the version, the default CNI and storage.
cp "$kube_bin/kubeadm" "$kube_bin/kubelet" "$kube_bin/kubectl" "$rootfs/usr/bin/"
echo "$kube_version" >"$rootfs/kind/version"
cp "$work/default-cni.yaml" "$work/default-storage.yaml" "$rootfs/kind/manifests/"
# Kubernetes 1.35+ kubelets refuse a cgroup v1 host unless told (these machines are cgroup v1;
# on a cgroup v2 host the flag changes nothing). kind's kubelet unit reads the extra arguments here.
# A host that withholds CAP_SYS_RESOURCE (these VMs) refuses the negative oom_score_adj containerd
# gives sandboxes and runc every pod start fails ("can't get final child's PID from pipe"): let
# containerd keep no score below its own, as kind's entrypoint does for rootless nodes.
sed -i 's/^\( *restrict_oom_score_adj = \)false/\1true/' "$rootfs/etc/containerd/config.toml"
grep -q 'restrict_oom_score_adj = true' "$rootfs/etc/containerd/config.toml"
grep -q -- --fail-cgroupv1 "$rootfs/etc/default/kubelet" ||
  sed -i 's/^KUBELET_EXTRA_ARGS=.*/& --fail-cgroupv1=false/' "$rootfs/etc/default/kubelet"

# kind's Dockerfile's systemd set-up: no units a container cannot run, kubelet and containerd on.
chroot "$rootfs" sh -euc '
  find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
  rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/*
  rm -f /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev*
  rm -f /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
  echo ReadKMsg=no >>/etc/systemd/journald.conf
  ln -sf /usr/lib/systemd/systemd /sbin/init
  systemctl enable kubelet.service containerd.service undo-mount-hacks.service
  systemctl mask systemd-binfmt.service'

# The images, into the node containerd's own store as kind's build imports them (namespace k8s.io,
# pinned, not unpacked), by the node's containerd run here on that store with only its image
# services.
state=$work/containerd-state
sock=$state/containerd.sock
mkdir -p "$rootfs/var/lib/containerd" "$state"
cat >"$state/config.toml" <<'TOML'
version = 3
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images"]
TOML
"$node_bin/containerd" --config "$state/config.toml" --root "$rootfs/var/lib/containerd" \
  --state "$state" --address "$sock" >"$state/log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
ctr() { "$node_bin/ctr" --address "$sock" --namespace=k8s.io "$@"; }
# (ctr warns of cgroup v1 on every call here: its messages are shown only when it fails.)
for tar in "$work"/images/*.tar; do
  ctr images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - \
    <"$tar" >/dev/null 2>"$state/ctr.log" || { cat "$state/ctr.log" >&2; exit 1; }
done
ctr images ls -q 2>/dev/null | grep -v '^import-' | sed 's/^/customize: preloaded /' >&2
kill "$pid"
wait "$pid" || true
