#!/usr/bin/env bash
# Lays out a CUDA LibTorch from PyPI wheels, on a machine with no GPU and no CUDA toolkit: the
# PyTorch wheel's LibTorch (CUDA 13, NCCL, cuDNN) and, from NVIDIA's wheels, the CUDA runtime,
# libraries and nvcc. Torch's CMake config needs nvcc (it enables the CUDA language) but nothing
# of cifartrain is CUDA source. Writes OUT_DIR/libtorch-cuda.cmake, an initial cache for
#   cmake -C OUT_DIR/libtorch-cuda.cmake -DCIFAR_WITH_NCCL=ON ...
# Used by the Dockerfile's runtime-gpu target. The wheels (about 3 GB) are downloaded once into
# WHEEL_DIR (default $CIFAR_GPU_WHEELS or ~/.cache/cifartrain/gpu-wheels); `download` only fetches
# them (scripts/build-images.sh does, on the host, and mounts them into the build).
#   deploy/images/cuda-libtorch.sh layout OUT_DIR [WHEEL_DIR]
#   deploy/images/cuda-libtorch.sh download [WHEEL_DIR]
set -euo pipefail
usage() { sed -n '10,11p' "$0" >&2; exit 2; }
case ${1:-} in
  layout) [ $# -ge 2 ] || usage; out=$(mkdir -p "$2" && cd "$2" && pwd); wheels=${3:-} ;;
  download) out=""; wheels=${2:-} ;;
  *) usage ;;
esac
wheels=${wheels:-${CIFAR_GPU_WHEELS:-$HOME/.cache/cifartrain/gpu-wheels}}
# torch 2.11.0's own pins (its Requires-Dist), plus the compiler wheels of the same CUDA release
torch_version=2.11.0
cuda_wheels=(nvidia-cuda-runtime==13.0.96 nvidia-cublas==13.1.0.3 nvidia-cufft==12.0.0.61
  nvidia-curand==10.4.0.35 nvidia-cusolver==12.0.4.66 nvidia-cusparse==12.6.3.3
  nvidia-cufile==1.15.1.6 nvidia-cuda-cupti==13.0.85 nvidia-nvjitlink==13.0.88
  nvidia-cuda-nvrtc==13.0.88 nvidia-nvtx==13.0.85 nvidia-cudnn-cu13==9.19.0.56
  nvidia-cusparselt-cu13==0.8.0 nvidia-nccl-cu13==2.28.9 nvidia-nvshmem-cu13==3.4.5
  nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
  nvidia-cuda-cccl==13.0.85)

mkdir -p "$wheels"
if [ ! -f "$wheels/.complete-$torch_version" ]; then
  pip download --quiet --no-deps --only-binary=:all: -d "$wheels" "torch==$torch_version" \
    "${cuda_wheels[@]}"
  touch "$wheels/.complete-$torch_version"
fi
[ -n "$out" ] || exit 0

# The wheels' own layout (torch/ beside nvidia/): torch's libraries find NVIDIA's through their
# RUNPATH ($ORIGIN/../../nvidia/...), so the image keeps it.
if [ ! -f "$out/.unpacked-$torch_version" ]; then
  for wheel in "$wheels"/torch-"$torch_version"-*.whl "$wheels"/nvidia_*.whl; do
    unzip -q -o "$wheel" -x '*.dist-info/*' -d "$out"
  done
  touch "$out/.unpacked-$torch_version"
fi

# nvidia/cu13 becomes the toolkit root CMake looks for: unversioned library links, lib64, and
# NCCL's headers where c10d's NCCLUtils.hpp expects them (beside cuda.h).
cuda=$out/nvidia/cu13
for lib in "$cuda"/lib/lib*.so.*; do
  link=${lib%%.so.*}.so
  [ -e "$link" ] || ln -s "$(basename "$lib")" "$link"
done
ln -sfn lib "$cuda/lib64"
for header in "$out"/nvidia/nccl/include/*; do ln -sfn "../../nccl/include/$(basename "$header")" "$cuda/include/"; done

# torch/include ships its own fmt 12 and protobuf headers; cifartrain uses Debian's fmt 9, spdlog
# and protobuf 3.21, whose headers must win: GCC searches -I before any -isystem.
first=$out/debian-first
mkdir -p "$first/google"
ln -sfn /usr/include/fmt "$first/fmt"
ln -sfn /usr/include/spdlog "$first/spdlog"
ln -sfn /usr/include/google/protobuf "$first/google/protobuf"

# Torch_DIR and Caffe2_DIR, not CMAKE_PREFIX_PATH, so that protoc and protobuf come from the
# system and not from the wheel; the library paths pin the wheel's over a Debian libtorch.
cat >"$out/libtorch-cuda.cmake" <<EOF
set(Torch_DIR "$out/torch/share/cmake/Torch" CACHE PATH "")
set(Caffe2_DIR "$out/torch/share/cmake/Caffe2" CACHE PATH "")
set(TORCH_LIBRARY "$out/torch/lib/libtorch.so" CACHE FILEPATH "")
set(c10_LIBRARY "$out/torch/lib/libc10.so" CACHE FILEPATH "")
set(C10_CUDA_LIBRARY "$out/torch/lib/libc10_cuda.so" CACHE FILEPATH "")
set(CUDA_TOOLKIT_ROOT_DIR "$cuda" CACHE PATH "")
set(CUDAToolkit_ROOT "$cuda" CACHE PATH "")
set(CMAKE_CUDA_COMPILER "$cuda/bin/nvcc" CACHE FILEPATH "")
set(CMAKE_CXX_FLAGS "-I$first" CACHE STRING "")
EOF
echo "CUDA LibTorch $torch_version laid out in $out; configure with: cmake -C $out/libtorch-cuda.cmake"
