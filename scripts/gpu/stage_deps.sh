#!/usr/bin/env bash
# The GPU machine has PyTorch (CUDA LibTorch, NCCL), CMake and ninja but none of Debian's
# libraries and no network. This stages, on a Debian 12 development machine, what cifar-train's
# build needs besides LibTorch (headers, CMake configs, shared libraries, protoc and
# grpc_cpp_plugin) into .gpu-carry/deps.tgz (about 33 MB), which the device tool carries:
#   scripts/gpu/stage_deps.sh
#   device: run(command="bash scripts/gpu/build.sh && bash scripts/gpu/check.sh", carry=[".gpu-carry"])
# .gpu-deps/ and .gpu-carry/ are listed in .gitignore.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
D=$REPO/.gpu-deps
rm -rf "$D"; mkdir -p "$D/usr/lib/x86_64-linux-gnu" "$D/usr/bin"
DEV=(libabsl-dev libarchive-dev libcli11-dev libcurl4-openssl-dev libfmt-dev libgrpc++-dev libgrpc-dev
     prometheus-cpp-dev libcivetweb-dev libprotobuf-dev libspdlog-dev libssl-dev nlohmann-json3-dev
     zlib1g-dev libc-ares-dev libre2-dev libgloo-dev)
# headers, cmake configs, unversioned .so links (no static archives, docs, man pages)
for p in "${DEV[@]}"; do
  dpkg -L "$p" | while read -r f; do
    [ -f "$f" ] || [ -L "$f" ] || continue
    case "$f" in
      /usr/include/*|/usr/lib/x86_64-linux-gnu/cmake/*|/usr/share/cmake/*|/usr/lib/x86_64-linux-gnu/pkgconfig/*|/usr/share/pkgconfig/*|/usr/lib/x86_64-linux-gnu/*.so)
        mkdir -p "$D$(dirname "$f")"; cp -a "$f" "$D$f";;
    esac
  done
done
cp -aL /usr/bin/protoc /usr/bin/grpc_cpp_plugin "$D/usr/bin/"
# shared libraries: everything the .so links and the two tools resolve to, except glibc and GCC's
skip='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|linux-vdso)\.so'
for t in "$D"/usr/lib/x86_64-linux-gnu/*.so /usr/bin/protoc /usr/bin/grpc_cpp_plugin; do
  t=/usr/lib/x86_64-linux-gnu/$(basename "$t"); [ -e "$t" ] || t=/usr/bin/$(basename "$t")
  { ldd "$(readlink -f "$t")" 2>/dev/null || true; } | awk '/=> \//{print $3}'
  readlink -f "$t"
done | sort -u | while read -r lib; do
  b=$(basename "$lib")
  [[ $b =~ $skip ]] && continue
  [[ $b == *.so.* ]] || continue
  src=$(readlink -f "$lib")
  cp -n "$src" "$D/usr/lib/x86_64-linux-gnu/" 2>/dev/null || true
  # keep the soname link the binaries ask for
  so=$(objdump -p "$src" | awk '/SONAME/{print $2}')
  [ -n "$so" ] && [ "$so" != "$(basename "$src")" ] && ln -sf "$(basename "$src")" "$D/usr/lib/x86_64-linux-gnu/$so"
done
# drop dangling .so links
find "$D" -xtype l -print -delete
# stubs for the operator's packages (cifar-operator is not built there, but configure finds them)
mkdir -p "$D/stubs/cpprestsdk" "$D/stubs/yaml-cpp"
echo 'if(NOT TARGET cpprestsdk::cpprest)
  add_library(cpprestsdk::cpprest INTERFACE IMPORTED)
endif()' > "$D/stubs/cpprestsdk/cpprestsdk-config.cmake"
echo 'if(NOT TARGET yaml-cpp)
  add_library(yaml-cpp INTERFACE IMPORTED)
endif()' > "$D/stubs/yaml-cpp/yaml-cpp-config.cmake"
du -sh "$D"; du -sh "$D"/usr/*/ "$D"/usr/lib/x86_64-linux-gnu
# what travels: one tarball (about 33 MB) next to the device scripts
mkdir -p "$REPO/.gpu-carry"
tar czf "$REPO/.gpu-carry/deps.tgz" -C "$REPO" .gpu-deps
ls -la "$REPO/.gpu-carry"
