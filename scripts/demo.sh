#!/usr/bin/env bash
# The main job: a distributed training run on real CIFAR-10 as local processes on loopback (one
# parameter server, the master, one worker and an evaluator; synchronous updates), ending with the
# evaluator's test accuracy on the 10,000 CIFAR-10 test images. ResNet-20, two epochs, one-cycle
# learning rate: about 2 minutes and ~71% on 2 cores (docs/BENCHMARKS.md, section 12).
#
# The data, in order of preference:
#   1. ../shared/data/cifar10 beside the repository (or $CIFAR10_SOURCE), decoded once into a
#      cache (scripts/cifar10-data.sh);
#   2. the official CIFAR-10 archive, when it can be reached (downloaded once into the cache,
#      MD5-checked, by cifar-train --download);
#   3. Fashion-MNIST from Debian's dataset-fashion-mnist, when neither is available.
#
# Usage: scripts/demo.sh [path/to/cifar-train] [extra cifar-train flags]
set -euo pipefail
bin=${1:-build/bin/cifar-train}
shift || true
here=$(cd "$(dirname "$0")" && pwd)
cache=${CIFAR_DATA_CACHE:-$HOME/.cache/cifartrain/data}
official_url=https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz

# ResNet-20 on 2 cores: two trainers of one thread each use both cores best (BENCHMARKS, sec. 5).
recipe=(-m resnet20 -nc 10 -e 2 -b 64 --lr 0.2 --schedule onecycle --label-smoothing 0.1)
# Why the shared copy could not be used, said if the demo falls back (its decoder's own words).
decode_errors=$(mktemp)
trap 'rm -f "$decode_errors"' EXIT
if data_dir=$("$here/cifar10-data.sh" 2>"$decode_errors"); then
  echo "demo: real CIFAR-10 (the JPEG copy in ../shared/data/cifar10, decoded into $data_dir)"
  data=(-d cifar10 --data-dir "$data_dir")
elif curl -sfIL --max-time 15 -o /dev/null "$official_url"; then
  echo "demo: the shared CIFAR-10 copy could not be used: $(tail -n 3 "$decode_errors")"
  echo "demo: real CIFAR-10 (the official archive, downloaded once into $cache/cifar10-official)"
  mkdir -p "$cache/cifar10-official"
  data=(-d cifar10 --data-dir "$cache/cifar10-official" --download)
else
  echo "demo: the shared CIFAR-10 copy could not be used: $(tail -n 3 "$decode_errors")"
  echo "demo: FALLING BACK to Fashion-MNIST: no usable CIFAR-10 here (the shared copy above," \
    "and $official_url unreachable)"
  data=(-d fashion-mnist)
  recipe=(-m simplecnn -nc 10 -e 2 -b 64 --train-limit 15000 --lr 0.04 --schedule onecycle
          --no-augment)
fi
model_dir=model/demo-${data[1]}
rm -rf "$model_dir"  # the demo always starts fresh
echo "demo: a parameter server, the master, one worker and an evaluator on 127.0.0.1"
echo "+ cifar-train --distributed ${recipe[*]} ${data[*]} --ps-mode sync -md $model_dir"
start=$SECONDS
# A checkpoint an epoch (the default), each evaluated by the evaluator on all 10,000 test images on
# the cores the trainers use: one every 130 updates (four more evaluations) took 226 s against
# 206 s, the same 70.93% (docs/BENCHMARKS.md, section 12).
"$here/local-job.sh" --bin "$bin" --ps 1 --workers 1 --port "${DEMO_PORT:-7000}" -- \
  "${recipe[@]}" "${data[@]}" -md "$model_dir" --ps-mode sync --threads 1 --workers 1 \
  --metrics-port "${DEMO_METRICS_PORT:-9464}" "$@"
echo
/usr/bin/python3 - "$model_dir/evaluation.jsonl" "${data[1]}" $((SECONDS - start)) <<'PY'
import json, sys
evaluations = [json.loads(line) for line in open(sys.argv[1])]
last = evaluations[-1]
print(f"demo: {sys.argv[2]} test accuracy {100 * last['test_accuracy']:.2f}% "
      f"on the 10,000 test images (the evaluator) after {last['epoch']} epochs, "
      f"{last['step']} synchronous updates, {sys.argv[3]} s")
PY
echo "per-epoch record: $model_dir/monitor.jsonl; evaluations: $model_dir/evaluation.jsonl"
