#!/usr/bin/env bash
# Lays out a minimal root filesystem for a dynamically linked binary: the binaries in
# /usr/local/bin, every shared library they load (ldd's closure) at its own path, the dynamic
# loader, and the CA bundle (cifar-train --download verifies TLS). The images are this tree and
# nothing else: no shell, no package manager, no compilers (Dockerfile, targets runtime,
# runtime-gpu and operator). Run where the binaries were built (the Dockerfile's build stages, or
# the host for the tests' images, which copy the test build's binaries in).
# Libraries after --dlopen are ones loaded at run time, which ldd cannot see (cuDNN's engines,
# NVRTC's builtins): each is copied with its own closure. --host-lib NAME allows NAME to be
# missing: the GPU driver's libcuda.so.1 is the node's, mounted in by the container runtime.
#   deploy/images/collect-rootfs.sh OUT_DIR [--host-lib NAME]... BINARY... [--dlopen LIBRARY...]
set -euo pipefail
out=$1
shift
mkdir -p "$out/usr/local/bin" "$out/usr/lib" "$out/usr/lib64" "$out/tmp" "$out/etc/ssl/certs"
chmod 1777 "$out/tmp"
# merged /usr, as on Debian 12: /lib and /lib64 are links, each library is copied to its real path
ln -sfn usr/lib "$out/lib"
ln -sfn usr/lib64 "$out/lib64"
host_libs=()
while [ "${1:-}" = --host-lib ]; do
  host_libs+=("$2")
  shift 2
done
# copy_closure FILE: FILE's libraries (ldd: "libx.so => /path (0x..)" and the loader's
# "/lib64/ld-linux-x86-64.so.2 (0x..)"), each at its real path.
copy_closure() {
  local missing
  missing=$(ldd "$1" | awk '$3 == "not" {print $1}' | grep -vxF -f <(printf '%s\n' "${host_libs[@]}" "") || true)
  if [ -n "$missing" ]; then
    echo "collect-rootfs.sh: $1 has unresolved libraries:" $missing >&2
    exit 1
  fi
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
    while read -r lib; do copy_library "$lib"; done
}
copy_library() {
  local real
  real="$(realpath "$(dirname "$1")")/$(basename "$1")"
  [ -e "$out$real" ] && return
  mkdir -p "$out$(dirname "$real")"
  cp -L "$1" "$out$real"
}
dlopened=false
for file in "$@"; do
  if [ "$file" = --dlopen ]; then
    dlopened=true
  elif $dlopened; then
    copy_library "$file"
    copy_closure "$file"
  else
    install -m 0755 "$file" "$out/usr/local/bin/"
    copy_closure "$file"
  fi
done
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/"
fi
# Numeric UID 65532 (non-root) needs no /etc/passwd entry; give it a name for tools that look.
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$out/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$out/etc/group"
