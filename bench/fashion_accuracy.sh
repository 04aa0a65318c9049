#!/usr/bin/env bash
# Fashion-MNIST test accuracy and wall time of simplecnn trained by cifar-train on the real
# dataset (Debian's dataset-fashion-mnist). The reference: the Fashion-MNIST benchmark's 2-conv
# CNN reaches 91.6%. Usage: bench/fashion_accuracy.sh [build-dir] [epochs]
set -euo pipefail
build=${1:-build}
epochs=${2:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmd=("$build/bin/cifar-train" -m simplecnn -d fashion-mnist -nc 10 -e "$epochs" -b 128
     --lr 0.04 --schedule onecycle --no-augment -md "$work/model" --progress lines
     --metrics-port -1)
echo "+ ${cmd[*]}" >&2
start=$(date +%s.%N)
"${cmd[@]}" | tee "$work/log" >&2
end=$(date +%s.%N)
/usr/bin/python3 - "$work/model/monitor.jsonl" "$start" "$end" "$(nproc)" "${cmd[*]}" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
start, end, cores, cmd = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
print("| epoch | train loss | train acc | test acc | img/s | epoch s |")
print("|---:|---:|---:|---:|---:|---:|")
for r in records:
    print(f"| {r['epoch']} | {r['train_loss']:.4f} | {100 * r['train_accuracy']:.2f}% | "
          f"{100 * r['test_accuracy']:.2f}% | {r['images_per_second']:.0f} | {r['seconds']:.0f} |")
print(f"\nFinal test accuracy {100 * records[-1]['test_accuracy']:.2f}%, wall time "
      f"{end - start:.0f} s on {cores} cores.")
model_dir = cmd.split(" -md ")[1].split()[0]
print(f"\nCommand: {cmd.replace(model_dir, '<tmp>/model')} (run by bench/fashion_accuracy.sh)")
PY
