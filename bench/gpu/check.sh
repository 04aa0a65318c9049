#!/usr/bin/env bash
# The GPU benchmarks of docs/BENCHMARKS.md (GPU), after bench/gpu/build.sh: CUDA training per
# model (images/s), the machine's CPU for contrast, the NCCL all-reduce (world size 1: NCCL
# refuses two ranks on one GPU) with replica checks, two ranks on the one GPU over Gloo, and
# parameter-server jobs whose trainers train on the GPU. Each run is printed with its exit status
# and wall time; a failing run does not stop the others.
#   bench/gpu/check.sh [BUILD_DIR]        (default build-gpu)
# Environment:
#   MODELS       models trained with -c cuda (default resnet20 resnet56 simplecnn fastnet alexnet
#                resnet23)
#   CPU_MODELS   models trained with -c cpu (default resnet20 simplecnn; " " for none)
#   PS_JOBS      0 skips the parameter-server jobs (default 1)
#   RESULTS_DIR  where the log (runs.log, appended) and the runs' model directories go
#                (default BUILD_DIR/gpu-check)
set -uo pipefail
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=$(cd "${1:-build-gpu}" && pwd) || exit 1
cifar_train=$build_dir/bin/cifar-train
results=${RESULTS_DIR:-$build_dir/gpu-check}
models=$results/models
mkdir -p "$results"
# every run starts from an empty model directory
rm -rf "$models"
# bench/gpu/build.sh's staged libraries, when it used them
deps_lib=$build_dir/deps/usr/lib/x86_64-linux-gnu
[ -d "$deps_lib" ] && export LD_LIBRARY_PATH=$deps_lib
exec > >(tee -a "$results/runs.log") 2>&1

timeout_s=120
run() {
  echo
  echo "### $*"
  local started
  started=$(date +%s%N)
  timeout "$timeout_s" "$@" 2>&1
  echo "rc=$? wall_ms=$((($(date +%s%N) - started) / 1000000))"
}
ldd "$cifar_train" | grep -E "not found|torch_cuda|nccl|grpc\+\+|spdlog"
"$cifar_train" --help | head -5
common=(-d synthetic -b 128 --metrics-port -1 --progress lines)
for model in ${MODELS:-resnet20 resnet56 simplecnn fastnet alexnet resnet23}; do
  run "$cifar_train" -m "$model" "${common[@]}" -c cuda -e 2 --synthetic-train-size 25600 \
    --model-dir "$models/gpu-$model"
done
# plain training as a user would start it: the default synthetic set (5,000 images), 3 epochs
run "$cifar_train" -m resnet20 -d synthetic -c cuda -b 128 -e 3 --metrics-port -1 \
  --model-dir "$models/gpu-plain"
for model in ${CPU_MODELS:-resnet20 simplecnn}; do
  timeout_s=200 run "$cifar_train" -m "$model" "${common[@]}" -c cpu -e 1 \
    --model-dir "$models/cpu-$model"
done
run "$cifar_train" launch -n 1 --dist-backend nccl -m resnet20 "${common[@]}" -c cuda -e 2 \
  --synthetic-train-size 25600 --verify-replicas-every 50 -v --model-dir "$models/nccl1"
run "$cifar_train" launch -n 2 --dist-backend gloo -m resnet20 "${common[@]}" -c cuda -e 2 \
  --synthetic-train-size 25600 --verify-replicas-every 50 --model-dir "$models/gloo2"
# expected to fail: NCCL refuses two ranks on one GPU ("Duplicate GPU detected")
timeout_s=45 run "$cifar_train" launch -n 2 --dist-backend nccl -m resnet20 "${common[@]}" -c cuda \
  -e 1 --dist-timeout 20 --model-dir "$models/nccl2"
if [[ ${PS_JOBS:-1} == 1 ]]; then
  # PS, master, two workers and an evaluator as processes; the three trainers share the one GPU.
  for mode in sync async; do
    run bash "$source_dir/scripts/local-job.sh" --bin "$cifar_train" --ps 2 --workers 2 \
      --port 7300 -- -m resnet20 "${common[@]}" -c cuda -e 3 --synthetic-train-size 12800 \
      --ps-mode "$mode" --model-dir "$models/ps-$mode"
  done
fi
exit 0
