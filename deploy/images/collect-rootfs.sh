#!/usr/bin/env bash
# Lays out a minimal root filesystem for a dynamically linked binary: the binaries in
# /usr/local/bin, every shared library they load (ldd's closure) at its own path, the dynamic
# loader, and the CA bundle (cifar-train --download verifies TLS). The images are this tree and
# nothing else: no shell, no package manager, no compilers (Dockerfile, targets runtime and
# operator). Run where the binaries were built (the Dockerfile's build stage, or the host for the
# tests' images, which copy the test build's binaries in).
#   deploy/images/collect-rootfs.sh OUT_DIR BINARY...
set -euo pipefail
out=$1
shift
mkdir -p "$out/usr/local/bin" "$out/usr/lib" "$out/usr/lib64" "$out/tmp" "$out/etc/ssl/certs"
chmod 1777 "$out/tmp"
# merged /usr, as on Debian 12: /lib and /lib64 are links, each library is copied to its real path
ln -sfn usr/lib "$out/lib"
ln -sfn usr/lib64 "$out/lib64"
for binary in "$@"; do
  install -m 0755 "$binary" "$out/usr/local/bin/"
  # "libx.so => /path (0x..)" and the loader's "/lib64/ld-linux-x86-64.so.2 (0x..)"
  if ldd "$binary" | grep -q 'not found'; then
    echo "collect-rootfs.sh: $binary has unresolved libraries:" >&2
    ldd "$binary" | grep 'not found' >&2
    exit 1
  fi
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
    while read -r lib; do
      real="$(realpath "$(dirname "$lib")")/$(basename "$lib")"
      [ -e "$out$real" ] && continue
      mkdir -p "$out$(dirname "$real")"
      cp -L "$lib" "$out$real"
    done
done
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/"
fi
# Numeric UID 65532 (non-root) needs no /etc/passwd entry; give it a name for tools that look.
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$out/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$out/etc/group"
