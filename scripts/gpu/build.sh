#!/usr/bin/env bash
# On the GPU machine, from the repository root (the device tool's working directory): unpacks the
# Debian libraries scripts/gpu/stage_deps.sh carried (.gpu-carry/deps.tgz) and builds cifar-train
# against the PyTorch wheel's CUDA LibTorch with the NCCL backend. Scratch on the device only:
# the libraries in /tmp/gd, the build in /tmp/bc (kept while the device stays warm).
# Log: $OUT/build.log. TARGETS (default cifar-train) names what to build; naming a bench-* target
# turns the benchmarks on (bench-ps-push-pull measures the PS on the device's 16 cores).
set -uo pipefail
R=$PWD; G=/tmp/gd; B=/tmp/bc
exec > >(tee -a "${OUT:-/tmp}/build.log") 2>&1
echo "== info"; date -u; uname -r; ldd --version | head -1; (g++ --version || c++ --version) | head -1
cmake --version | head -1; ninja --version; nvcc --version | tail -2; nproc; nvidia-smi -L
PY=$(command -v python3); echo "python3=$PY"
TP=$($PY -c 'import torch;print(torch.utils.cmake_prefix_path)'); echo "torch prefix $TP"
$PY -c 'import torch;print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch._C._GLIBCXX_USE_CXX11_ABI, torch.cuda.nccl.version())'
TI=$(dirname $(dirname $TP))/include; ls $TI | tr '\n' ' '; echo
ls /usr/lib/x86_64-linux-gnu | grep -E "libxml2|libicu|libcurl|libssl|libarchive" | tr '\n' ' '; echo
strings /usr/lib/x86_64-linux-gnu/libstdc++.so.6 | grep -E '^GLIBCXX_3\.4\.[0-9]+$' | sort -V | tail -1
mkdir -p $G; tar xzf .gpu-carry/deps.tgz -C $G --strip-components=1; D=$G
L=$D/usr/lib/x86_64-linux-gnu
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' $L $D/usr/bin/protoc > $D/protoc; chmod +x $D/protoc
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' $L $D/usr/bin/grpc_cpp_plugin > $D/grpc_cpp_plugin; chmod +x $D/grpc_cpp_plugin
for p in csharp node objective_c php python ruby; do touch $D/usr/bin/grpc_${p}_plugin; done; touch $D/usr/bin/civetweb
$D/protoc --version
# torch/include ships fmt 12, which Debian's spdlog 1.10 cannot use: put Debian's fmt 9 (and spdlog)
# on -I, which GCC searches before every -isystem directory
mkdir -p $D/first; ln -sfn $D/usr/include/fmt $D/first/fmt; ln -sfn $D/usr/include/spdlog $D/first/spdlog
TARGETS=${TARGETS:-cifar-train}; BENCH=OFF; [[ $TARGETS == *bench-* ]] && BENCH=ON
echo "== configure"; T0=$(date +%s)
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCIFAR_WITH_NCCL=ON \
  -DCIFAR_BUILD_TESTS=OFF -DCIFAR_BUILD_BENCH=$BENCH \
  -DCMAKE_PREFIX_PATH="$TP;$D/usr;$D/stubs" -DCMAKE_CXX_FLAGS="-I$D/first" \
  -DProtobuf_PROTOC_EXECUTABLE=$D/protoc -DGRPC_CPP_PLUGIN=$D/grpc_cpp_plugin \
  -DCMAKE_EXE_LINKER_FLAGS="-L$L -Wl,-rpath-link,$L" -DCMAKE_CXX_STANDARD_LIBRARIES=-lprotobuf -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$L" \
  ${EXTRA_CMAKE:-} || { echo CONFIGURE FAILED; tail -50 $B/CMakeFiles/CMakeError.log 2>/dev/null; exit 1; }
grep -E "^Protobuf_LIBRAR|^CIFAR_WITH_NCCL|^Torch_DIR" $B/CMakeCache.txt
echo "== build"; ninja -C $B -j16 -k 0 $TARGETS; rc=$?
echo "build rc=$rc in $(( $(date +%s) - T0 )) s"; ls -la $B/bin/ 2>/dev/null
exit $rc
