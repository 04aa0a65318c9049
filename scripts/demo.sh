#!/usr/bin/env bash
# The main job: a short training run on real data (Fashion-MNIST from Debian's
# dataset-fashion-mnist; CIFAR cannot be downloaded on these machines), with progress and the
# final test accuracy. Usage: scripts/demo.sh [path/to/cifar-train] [extra cifar-train flags]
set -euo pipefail
bin=${1:-build/bin/cifar-train}
shift || true
model_dir=model/demo-fashion-mnist
rm -rf "$model_dir"  # the demo always starts fresh
# Two epochs on a quarter of the training images (~2 minutes on 2 cores), evaluated on the full
# 10,000-image test set; bench/fashion_accuracy.sh runs the full-length recipe.
"$bin" -m simplecnn -md "$model_dir" -nc 10 -d fashion-mnist -e 2 -b 128 --train-limit 15000 \
  --lr 0.04 --schedule onecycle --no-augment --progress auto "$@"
echo "per-epoch record: $model_dir/monitor.jsonl"
