#!/usr/bin/env bash
# Training images/s: cifar-train (C++, its real threaded data loader included) against the same
# model, batch, optimizer and thread count in PyTorch Python (same LibTorch 1.13 underneath),
# side by side in one run. Usage: bench/train_throughput.sh [build-dir] [steps] [models...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
steps=${2:-30}
shift $(( $# > 2 ? 2 : $# )) || true
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(simplecnn alexnet resnet20)
threads=$(nproc)
batch=128
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "# training throughput, batch $batch, $threads threads, $steps steps after 3 warm-up steps"
echo "# command: bench/train_throughput.sh $build $steps ${models[*]}"
echo
echo "| model | cifar-train img/s | PyTorch Python img/s | ratio C++/Python | C++ time: data wait / fwd / bwd / opt / other | Python time: fwd / bwd / opt / other |"
echo "|---|---|---|---|---|---|"
for m in "${models[@]}"; do
  log="$work/$m.log"
  "$build/bin/cifar-train" -m "$m" -d synthetic --data-dir "$work/data" \
    --synthetic-train-size $(( batch * (steps + 4) )) --synthetic-test-size 256 \
    -md "$work/$m" -b $batch -t "$threads" --max-steps $(( steps + 3 )) -e 1 \
    --progress none --metrics-port -1 > "$log" 2>&1 || { cat "$log"; exit 1; }
  cpp=$(sed -n 's/.*(\([0-9.]*\) img\/s after warm-up).*/\1/p' "$log")
  cpp_phases=$(sed -n 's/.*step time: data wait \([0-9.]*\)%, forward \([0-9.]*\)%, backward \([0-9.]*\)%, optimizer \([0-9.]*\)%, other \([0-9.]*\)%.*/\1 \/ \2 \/ \3 \/ \4 \/ \5 %/p' "$log")
  py_json=$(/usr/bin/python3 "$here/train_throughput.py" --model "$m" --batch-size $batch \
    --threads "$threads" --steps "$steps")
  read -r py py_phases < <(/usr/bin/python3 -c '
import json, sys
r = json.loads(sys.argv[1]); p = r["phases"]
print("%.1f" % r["images_per_second"], " / ".join("%.1f" % (100 * p[k]) for k in ("forward", "backward", "optimizer", "other")) + " %")' "$py_json")
  ratio=$(/usr/bin/python3 -c "print('%.2f' % ($cpp / $py))")
  echo "| $m | $cpp | $py | $ratio | $cpp_phases | $py_phases |"
done
