#!/usr/bin/env bash
# The main job: a local distributed training run on real data (Fashion-MNIST from Debian's
# dataset-fashion-mnist; CIFAR cannot be downloaded on these machines): one parameter server,
# the master, two workers and an evaluator as processes on loopback, synchronous updates. Prints
# the evaluator's final test accuracy.
# Usage: scripts/demo.sh [path/to/cifar-train] [extra cifar-train flags]
set -euo pipefail
bin=${1:-build/bin/cifar-train}
shift || true
model_dir=model/demo-fashion-mnist
rm -rf "$model_dir"  # the demo always starts fresh
here=$(dirname "$0")
# Two epochs on a quarter of the training images (~3 minutes on 2 cores), evaluated on the full
# 10,000-image test set. Three trainers x batch 42 = a global batch of 126.
"$here/local-job.sh" --bin "$bin" --ps 1 --workers 2 --port "${DEMO_PORT:-7000}" -- \
  -m simplecnn -md "$model_dir" -nc 10 -d fashion-mnist -e 2 -b 42 --train-limit 15000 \
  --lr 0.04 --schedule onecycle --no-augment --ps-mode sync --threads 1 --workers 1 \
  --checkpoint-every 40 --metrics-port "${DEMO_METRICS_PORT:-9464}" "$@"
echo
echo "evaluator: $(grep -h '' "$model_dir/evaluation.jsonl" | tail -1)"
echo "per-epoch record: $model_dir/monitor.jsonl; evaluations: $model_dir/evaluation.jsonl"
