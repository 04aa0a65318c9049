#!/usr/bin/env bash
# Fashion-MNIST test accuracy per parameter-server mode after the same number of epochs: the
# demo's job (one PS, the master and two workers, batch 42 each, 2 epochs on 15,000 training
# images, one-cycle schedule), evaluated on the full 10,000-image test set. What staleness costs.
# Usage: bench/ps_accuracy.sh [build-dir] [peak-lr] [modes...]  ("async+slr": --staleness-lr)
set -euo pipefail
build=${1:-build}
lr=${2:-0.01}
shift 2 || shift $#
modes=("$@")
((${#modes[@]})) || modes=(sync async async-reply hogwild ssp async+slr)
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| mode | updates | final test accuracy | best | master's last-epoch train loss | wall s |"
echo "|---|---:|---:|---:|---:|---:|"
for entry in "${modes[@]}"; do
  mode=${entry%+slr}
  extra=()
  [[ $entry == *+slr ]] && extra=(--staleness-lr)
  rm -rf "$work/model"
  start=$(date +%s.%N)
  "$here/../scripts/local-job.sh" --bin "$build/bin/cifar-train" --ps 1 --workers 2 --port 7800 -- \
    -m simplecnn -d fashion-mnist -nc 10 -e 2 -b 42 --train-limit 15000 --lr "$lr" \
    --schedule onecycle --no-augment --ps-mode "$mode" "${extra[@]}" --threads 1 --workers 1 \
    -md "$work/model" --metrics-port -1 --progress none > "$work/log" 2>&1 || true
  end=$(date +%s.%N)
  /usr/bin/python3 - "$work/model" "$entry" "$start" "$end" "$work/log" <<'PY'
import json, os, sys
model, entry, start, end, log = sys.argv[1:6]
evals = [json.loads(l) for l in open(os.path.join(model, "evaluation.jsonl"))] \
    if os.path.exists(os.path.join(model, "evaluation.jsonl")) else []
monitor = [json.loads(l) for l in open(os.path.join(model, "monitor.jsonl"))] \
    if os.path.exists(os.path.join(model, "monitor.jsonl")) else []
if not evals:
    reason = [l for l in open(log) if "[error]" in l]
    print(f"| {entry} | - | failed: {reason[0].split('] ')[-1].strip() if reason else 'see log'} | - | - | - |")
else:
    last = evals[-1]
    best = max(e["test_accuracy"] for e in evals)
    loss = monitor[-1]["train_loss"] if monitor else float("nan")
    print(f"| {entry} | {last['step']} | {100 * last['test_accuracy']:.2f}% | {100 * best:.2f}% "
          f"| {loss:.4f} | {float(end) - float(start):.0f} |")
PY
done
echo
echo "Command: bench/ps_accuracy.sh $build $lr ${modes[*]} ($(nproc) cores)"
