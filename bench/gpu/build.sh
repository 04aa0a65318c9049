#!/usr/bin/env bash
# Builds cifar-train with the NCCL backend on a machine with an NVIDIA GPU, against the CUDA
# LibTorch of the PyTorch wheel installed for python3 and the Debian 12 libraries that
# bench/gpu/stage_deps.sh packed (bench/gpu/README.md says what the machine needs).
#   bench/gpu/build.sh [BUILD_DIR]        (default build-gpu; cifar-train lands in BUILD_DIR/bin)
# Environment:
#   DEPS_TARBALL  stage_deps.sh's tarball (default BUILD_DIR/deps.tgz), unpacked into
#                 BUILD_DIR/deps; without it, an earlier unpacking there is used
#   TARGETS       what to build (default cifar-train); naming a bench-* target turns the
#                 benchmarks on, e.g. TARGETS=bench-ps-push-pull
#   JOBS          parallel compile jobs (default: every core)
#   CMAKE_ARGS    more arguments for the configure step
# The output also goes to BUILD_DIR/build.log (appended).
set -uo pipefail
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=$(mkdir -p "${1:-build-gpu}" && cd "${1:-build-gpu}" && pwd)
deps_tarball=${DEPS_TARBALL:-$build_dir/deps.tgz}
deps=$build_dir/deps
deps_lib=$deps/usr/lib/x86_64-linux-gnu
targets=${TARGETS:-cifar-train}
exec > >(tee -a "$build_dir/build.log") 2>&1

echo "== machine"
date -u; uname -r; ldd --version | head -1; (g++ --version || c++ --version) | head -1
cmake --version | head -1; ninja --version; nvcc --version | tail -2; nproc; nvidia-smi -L
python=$(command -v python3); echo "python3=$python"
torch_prefix=$($python -c 'import torch;print(torch.utils.cmake_prefix_path)')
echo "torch CMake prefix $torch_prefix"
$python -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(),
  torch._C._GLIBCXX_USE_CXX11_ABI, torch.cuda.nccl.version())'

if [ -f "$deps_tarball" ]; then
  mkdir -p "$deps"
  tar xzf "$deps_tarball" -C "$deps" --strip-components=1
elif [ ! -d "$deps_lib" ]; then
  echo "no $deps_tarball and nothing unpacked in $deps: see bench/gpu/README.md" >&2
  exit 1
fi
# What the staged libraries need because they are not where the loader and the linker look:
# protoc and grpc_cpp_plugin run during the build, so they get wrappers that set the loader path;
# the linker finds the staged libraries' own dependencies through -rpath-link.
for tool in protoc grpc_cpp_plugin; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$deps_lib" "$deps/usr/bin/$tool" \
    >"$deps/$tool"
  chmod +x "$deps/$tool"
done
# Debian's gRPC and civetweb CMake configs refuse to load when an executable they export is
# missing; only protoc and grpc_cpp_plugin are staged, so the others get empty placeholders.
for language in csharp node objective_c php python ruby; do
  touch "$deps/usr/bin/grpc_${language}_plugin"
done
touch "$deps/usr/bin/civetweb"
"$deps/protoc" --version
# torch/include ships fmt 12, which Debian's spdlog 1.10 cannot use: Debian's fmt 9 and spdlog go
# on -I, which GCC searches before every -isystem directory (as deploy/images/cuda-libtorch.sh).
headers_first=$deps/first
mkdir -p "$headers_first"
ln -sfn "$deps/usr/include/fmt" "$headers_first/fmt"
ln -sfn "$deps/usr/include/spdlog" "$headers_first/spdlog"

bench=OFF
[[ $targets == *bench-* ]] && bench=ON
echo "== configure"
started=$(date +%s)
# -lprotobuf on every link worked around the wheel's Caffe2Config stubbing protobuf::libprotobuf;
# cmake/Torch.cmake now finds Protobuf ahead of Torch, so it is likely redundant, but the
# published GPU figures were built with it.
# shellcheck disable=SC2086  # CMAKE_ARGS is a list of words
cmake -S "$source_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCIFAR_WITH_NCCL=ON \
  -DCIFAR_BUILD_TESTS=OFF -DCIFAR_BUILD_BENCH=$bench \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$deps/usr;$deps/stubs" -DCMAKE_CXX_FLAGS="-I$headers_first" \
  -DProtobuf_PROTOC_EXECUTABLE="$deps/protoc" -DGRPC_CPP_PLUGIN="$deps/grpc_cpp_plugin" \
  -DCMAKE_EXE_LINKER_FLAGS="-L$deps_lib -Wl,-rpath-link,$deps_lib" \
  -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$deps_lib" \
  -DCMAKE_CXX_STANDARD_LIBRARIES=-lprotobuf \
  ${CMAKE_ARGS:-} || {
  echo "configure failed"
  tail -50 "$build_dir/CMakeFiles/CMakeError.log" 2>/dev/null
  exit 1
}
grep -E "^Protobuf_LIBRAR|^CIFAR_WITH_NCCL|^Torch_DIR" "$build_dir/CMakeCache.txt"
echo "== build"
# shellcheck disable=SC2086  # TARGETS is a list of targets
ninja -C "$build_dir" -j "${JOBS:-$(nproc)}" -k 0 $targets
status=$?
echo "build rc=$status in $(($(date +%s) - started)) s"
ls -la "$build_dir/bin/" 2>/dev/null
echo "run with LD_LIBRARY_PATH=$deps_lib"
exit $status
