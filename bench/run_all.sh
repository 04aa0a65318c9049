#!/usr/bin/env bash
# Runs every benchmark of docs/BENCHMARKS.md in turn (about three hours on 2 cores).
# Usage: bench/run_all.sh [build-dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
echo "## 1. Training throughput"; bash "$here/train_throughput.sh" "$build" 20
echo; echo "## 2. Data pipeline"; bash "$here/data_pipeline.sh" "$build" 2>/dev/null
echo; echo "## 3. Fashion-MNIST accuracy"; bash "$here/fashion_accuracy.sh" "$build" 6 2>/dev/null
echo; echo "## 4. Parameter server: push-and-pull vs TCP loopback"; "$build/bin/bench-ps-push-pull" 100
echo; echo "## 5. Parameter server: images/s per mode"; bash "$here/ps_modes.sh" "$build"
echo; echo "## 6. Parameter server: Fashion-MNIST accuracy per mode"; bash "$here/ps_accuracy.sh" "$build" 0.01
echo; echo "## 7. All-reduce: two-rank step time"; bash "$here/allreduce_step.sh" "$build" 20
echo; echo "## 8. All-reduce bus bandwidth"; "$build/bin/bench-allreduce-busbw" 2
echo; echo "## 9. Operator: 100 jobs against Kubeflow's training-operator"; bash "$here/operator_scale.sh" "$build" 100 2>/dev/null
echo; echo "## 12. CIFAR-10 accuracy per way of training, beside PyTorch"
# The documented subset (40 minutes at ~350 img/s; the whole set takes about five times as long).
/usr/bin/python3 "$here/cifar10_accuracy.py" --build "$build" --seeds 1,2 --train-limit 10000 \
  --test-limit 5000 --results "$(mktemp -d)/results.jsonl"
echo; echo "## 15. Checkpoints in object storage against a local volume"; bash "$here/checkpoint_store.sh" "$build" 2>/dev/null
echo; echo "## 16. Parameter server: mutual TLS against plaintext"; bash "$here/ps_tls.sh" "$build"
echo; echo "## 19. A dataset fetched from object storage against curl"; bash "$here/dataset_fetch.sh" "$build" 2>/dev/null
echo; echo "## 19 (continued). A pod's start to its first step, data in the bucket against a volume"; bash "$here/dataset_pod_start.sh" "$build" 2>/dev/null
echo; echo "## 20. Elastic all-reduce: a rank lost, a rank added"; bash "$here/elastic_regroup.sh" "$build" 2>/dev/null
echo; echo "## 20c. Accuracy of an elastic job resized at every epoch boundary and mid-epoch"
/usr/bin/python3 "$here/elastic_accuracy.py" --build "$build" --seeds 1,2,3,4,5,6 \
  --results "$(mktemp -d)/results.jsonl"
