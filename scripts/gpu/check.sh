#!/usr/bin/env bash
# On the GPU machine after scripts/gpu/build.sh: CUDA training per model (images/s), the device's
# CPU for contrast, the NCCL all-reduce (world size 1: NCCL refuses two ranks on one GPU) with
# replica checks, two ranks on the one GPU over Gloo, and parameter-server jobs whose trainers
# train on the GPU (PS=0 skips those). Log: $OUT/runs.log.
set -uo pipefail
B=/tmp/bc; CT=$B/bin/cifar-train
export LD_LIBRARY_PATH=/tmp/gd/usr/lib/x86_64-linux-gnu
exec > >(tee -a "${OUT:-/tmp}/runs.log") 2>&1
run() { echo; echo "### $*"; local s=$(date +%s%N); timeout ${TMO:-120} "$@" 2>&1; echo "rc=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))"; }
ldd $CT | grep -E "not found|torch_cuda|nccl|grpc\+\+|spdlog" ; $CT --help | head -5
C="-d synthetic -b 128 --metrics-port -1 --progress lines"
for m in ${MODELS:-resnet20 resnet56 simplecnn fastnet alexnet resnet23}; do
  run $CT -m $m $C -c cuda -e 2 --synthetic-train-size 25600 --model-dir /tmp/md-gpu-$m
done
# the exact command of the brief (defaults: 5000 synthetic images, 1 epoch? see -e default)
run $CT -m resnet20 -d synthetic -c cuda -b 128 -e 3 --metrics-port -1 --model-dir /tmp/md-gpu-plain
for m in ${CPU_MODELS:-resnet20 simplecnn}; do
  TMO=200 run $CT -m $m $C -c cpu -e 1 --model-dir /tmp/md-cpu-$m
done
run $CT launch -n 1 --dist-backend nccl -m resnet20 $C -c cuda -e 2 --synthetic-train-size 25600 --verify-replicas-every 50 -v --model-dir /tmp/md-nccl1
run $CT launch -n 2 --dist-backend gloo -m resnet20 $C -c cuda -e 2 --synthetic-train-size 25600 --verify-replicas-every 50 --model-dir /tmp/md-gloo2
TMO=45 run $CT launch -n 2 --dist-backend nccl -m resnet20 $C -c cuda -e 1 --dist-timeout 20 --model-dir /tmp/md-nccl2
if [[ ${PS:-1} == 1 ]]; then
  # PS, master, two workers and an evaluator as processes; the three trainers share the one GPU.
  for mode in sync async; do
    run bash scripts/local-job.sh --bin $CT --ps 2 --workers 2 --port 7300 -- -m resnet20 $C -c cuda \
      -e 3 --synthetic-train-size 12800 --ps-mode $mode --model-dir /tmp/md-ps-$mode
  done
fi
exit 0
