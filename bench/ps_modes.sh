#!/usr/bin/env bash
# Parameter-server throughput per mode with 1, 2 and 4 trainers (the master plus 0, 1 and 3
# workers) on this machine: aggregate training images/s after warm-up, and the share of each
# trainer's step spent in push+pull. Every process runs one intra-op thread; one PS shard.
# simplecnn on synthetic data, 4096 images per run (one epoch, batch 32 per trainer).
# Usage: bench/ps_modes.sh [build-dir] [modes...]
set -euo pipefail
build=${1:-build}
shift || true
modes=("$@")
((${#modes[@]})) || modes=(sync async async-reply hogwild ssp)
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| mode | trainers | images/s (all trainers) | push+pull share of step | wall s |"
echo "|---|---:|---:|---:|---:|"
for mode in "${modes[@]}"; do
  for trainers in 1 2 4; do
    rm -rf "$work/model"
    start=$(date +%s.%N)
    "$here/../scripts/local-job.sh" --bin "$build/bin/cifar-train" --ps 1 \
      --workers $((trainers - 1)) --port 7700 --no-evaluator -- \
      -m simplecnn -d synthetic --synthetic-train-size 4096 --synthetic-test-size 64 -e 1 -b 32 \
      --lr 0.005 --schedule constant --ps-mode "$mode" --threads 1 --workers 1 \
      -md "$work/model" --metrics-port -1 --progress none > "$work/log" 2>&1
    end=$(date +%s.%N)
    /usr/bin/python3 - "$work/log" "$mode" "$trainers" "$start" "$end" <<'PY'
import re, sys
log, mode, trainers, start, end = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
text = open(log).read()
rates = [float(m) for m in re.findall(r"\(([\d.]+) img/s after warm-up\)", text)]
shares = [float(m) for m in re.findall(r"communication ([\d.]+)%", text)]
assert len(rates) == int(trainers), text
print(f"| {mode} | {trainers} | {sum(rates):.0f} | {sum(shares) / len(shares):.1f}% | {end - start:.0f} |")
PY
  done
done
echo
echo "Command: bench/ps_modes.sh $build ${modes[*]} ($(nproc) cores)"
