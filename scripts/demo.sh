#!/usr/bin/env bash
# The main job: a short training run on real data (Fashion-MNIST from Debian's
# dataset-fashion-mnist; CIFAR cannot be downloaded on these machines), with progress and the
# final test accuracy. Usage: scripts/demo.sh [path/to/cifar-train] [extra cifar-train flags]
set -euo pipefail
bin=${1:-build/bin/cifar-train}
shift || true
model_dir=model/demo-fashion-mnist
rm -rf "$model_dir"  # the demo always starts fresh
"$bin" -m simplecnn -md "$model_dir" -nc 10 -d fashion-mnist -e 2 -b 128 \
  --lr 0.05 --schedule onecycle --progress auto "$@"
echo "per-epoch record: $model_dir/monitor.jsonl"
