#!/usr/bin/env bash
# For a GPU machine that has PyTorch's CUDA wheel, CMake and Ninja but not Debian 12's libraries
# (and no package network): packs, on a Debian 12 machine where scripts/install-deps.sh has run,
# everything cifar-train's build needs besides LibTorch (headers, CMake configs, shared libraries,
# protoc and grpc_cpp_plugin) into one tarball (about 33 MB). Copy it, with the checkout, to the
# GPU machine and build there with bench/gpu/build.sh (bench/gpu/README.md).
#   bench/gpu/stage_deps.sh [TARBALL]      (default build-gpu/deps.tgz, where build.sh looks)
set -euo pipefail
tarball=${1:-build-gpu/deps.tgz}
mkdir -p "$(dirname "$tarball")"
tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
# One top-level directory in the tarball; build.sh strips it when unpacking.
deps=$staging/deps
system_lib=/usr/lib/x86_64-linux-gnu
mkdir -p "$deps$system_lib" "$deps/usr/bin"
dev_packages=(libabsl-dev libarchive-dev libcli11-dev libcurl4-openssl-dev libfmt-dev libgrpc++-dev
  libgrpc-dev prometheus-cpp-dev libcivetweb-dev libprotobuf-dev libspdlog-dev libssl-dev
  nlohmann-json3-dev zlib1g-dev libc-ares-dev libre2-dev libgloo-dev)
# headers, CMake configs, pkg-config files and unversioned .so links (no static archives, docs)
for package in "${dev_packages[@]}"; do
  dpkg -L "$package" | while read -r file; do
    [ -f "$file" ] || [ -L "$file" ] || continue
    case "$file" in
      /usr/include/* | $system_lib/cmake/* | /usr/share/cmake/* | $system_lib/pkgconfig/* | \
        /usr/share/pkgconfig/* | $system_lib/*.so)
        mkdir -p "$deps$(dirname "$file")"
        cp -a "$file" "$deps$file"
        ;;
    esac
  done
done
cp -aL /usr/bin/protoc /usr/bin/grpc_cpp_plugin "$deps/usr/bin/"
# The shared libraries: every one the staged .so links and the two tools resolve to, except
# glibc's and GCC's (the GPU machine's own, which must be at least as new as Debian 12's).
system_runtime='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|'
system_runtime+='libstdc\+\+|libgcc_s|linux-vdso)\.so'
for staged in "$deps$system_lib"/*.so /usr/bin/protoc /usr/bin/grpc_cpp_plugin; do
  installed=$system_lib/$(basename "$staged")
  [ -e "$installed" ] || installed=/usr/bin/$(basename "$staged")
  { ldd "$(readlink -f "$installed")" 2>/dev/null || true; } | awk '/=> \//{print $3}'
  readlink -f "$installed"
done | sort -u | while read -r library; do
  name=$(basename "$library")
  [[ $name =~ $system_runtime ]] && continue
  [[ $name == *.so.* ]] || continue
  real_file=$(readlink -f "$library")
  cp -n "$real_file" "$deps$system_lib/" 2>/dev/null || true
  # keep the soname link the binaries ask for
  soname=$(objdump -p "$real_file" | awk '/SONAME/{print $2}')
  if [ -n "$soname" ] && [ "$soname" != "$(basename "$real_file")" ]; then
    ln -sf "$(basename "$real_file")" "$deps$system_lib/$soname"
  fi
done
# drop .so links whose library was not staged
find "$deps" -xtype l -print -delete
# cifar-operator is not built for the GPU, but configuring the tree finds its packages
# (operator/CMakeLists.txt): empty stand-ins for the two that are not staged.
mkdir -p "$deps/stubs/cpprestsdk" "$deps/stubs/yaml-cpp"
echo 'if(NOT TARGET cpprestsdk::cpprest)
  add_library(cpprestsdk::cpprest INTERFACE IMPORTED)
endif()' >"$deps/stubs/cpprestsdk/cpprestsdk-config.cmake"
echo 'if(NOT TARGET yaml-cpp)
  add_library(yaml-cpp INTERFACE IMPORTED)
endif()' >"$deps/stubs/yaml-cpp/yaml-cpp-config.cmake"
du -sh "$deps"
du -sh "$deps"/usr/*/ "$deps$system_lib"
tar czf "$tarball" -C "$staging" deps
ls -la "$tarball"
