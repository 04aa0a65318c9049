#!/usr/bin/env bash
# Compiles the all-reduce library with its NCCL path (CIFAR_WITH_NCCL) against a CUDA LibTorch's
# headers, on a machine with no GPU and no CUDA toolkit: PyTorch 1.13.1's CUDA 11.7 wheel (the
# LibTorch version the CPU build uses) and NVIDIA's header wheels, all from PyPI (about 1.6 GB,
# downloaded once into $CIFAR_CUDA_WHEELS). The defines are the ones the wheel's CMake targets
# (torch, torch_cuda) give their users.
# Compile only: the wheel's LibTorch uses the pre-C++11 ABI, so it cannot be linked with Debian's
# spdlog or gRPC; a GPU machine builds the whole CUDA flavour against its own LibTorch instead.
#   scripts/check_nccl_compiles.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${CIFAR_CUDA_WHEELS:-$HOME/.cache/cifartrain/cuda-wheels}
mkdir -p "$cache"
cd "$cache"
if [ ! -f .unpacked ]; then
  pip download --no-deps --only-binary=:all: --python-version 3.11 -d . \
    torch==1.13.1 nvidia-cuda-runtime-cu11==11.7.99 nvidia-cuda-nvcc-cu11==11.7.99 \
    nvidia-nccl-cu11 nvidia-cublas-cu11==11.10.3.66 nvidia-cusparse-cu11 nvidia-cusolver-cu11
  unzip -q -o torch-1.13.1-*.whl 'torch/include/*'
  for wheel in nvidia_*.whl; do unzip -q -o "$wheel" 'nvidia/*/include/*'; done
  touch .unpacked
fi
includes=(-isystem "$cache/torch/include" -isystem "$cache/torch/include/torch/csrc/api/include")
for dir in "$cache"/nvidia/*/include; do includes+=(-isystem "$dir"); done
defines=(-D_GLIBCXX_USE_CXX11_ABI=0 -DUSE_DISTRIBUTED -DUSE_C10D_GLOO -DUSE_C10D_NCCL -DUSE_RPC
  -DUSE_TENSORPIPE -DCIFAR_WITH_CUDA=1 -DCIFAR_WITH_NCCL)
cd "$repo"
for source in runtime/dist/allreduce/*.cpp runtime/train/setup.cpp; do
  echo "compiling $source (CUDA LibTorch 1.13.1, NCCL)"
  g++ -std=c++17 -O1 -c -o /dev/null -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Werror \
    -pthread "${defines[@]}" -I runtime "${includes[@]}" "$source"
done
echo "the NCCL path compiles against CUDA LibTorch 1.13.1"
