#!/usr/bin/env bash
# Two-rank data-parallel step time on CPU: cifar-train (c10d Gloo, buckets all-reduced during
# backward) with overlap on and off, the same per-rank step with no communication at all (two
# independent single-process runs at once: the limit), and PyTorch DDP in Python (Gloo, same
# bucket size), alternating for ROUNDS rounds in the same run; medians. Per-rank batch 64, one
# intra-op thread per rank (2 ranks on 2 cores), 20 steps after 3 warm-up steps.
#   bench/allreduce_step.sh [build-dir] [steps] [models...]      ROUNDS=3 by default
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
steps=${2:-20}
shift $(($# > 2 ? 2 : $#)) || true
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet20 alexnet)
rounds=${ROUNDS:-3}
batch=64
bucket_mb=25
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

train_flags() {  # model, model dir
  echo -m "$1" -d synthetic --data-dir "$work/data" \
    --synthetic-train-size $((2 * batch * (steps + 4))) --synthetic-test-size 64 \
    -md "$2" -b $batch -t 1 --workers 1 --max-steps $((steps + 3)) -e 1 \
    --progress none --metrics-port -1
}
# Seconds per step from a log's "(X img/s after warm-up)" lines (the mean over the ranks).
step_seconds() {
  grep -o '([0-9.]* img/s after warm-up)' "$1" | tr -d '(' |
    awk -v b=$batch '{ s += b / $1; n++ } END { if (n == 0) exit 1; printf "%.4f\n", s / n }'
}
run() {  # name, log, command...
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 || { cat "$log"; exit 1; }
}

results="$work/results.txt"
"$build/bin/cifar-train" $(train_flags simplecnn "$work/warm") >/dev/null 2>&1  # writes the data
for m in "${models[@]}"; do
  for r in $(seq "$rounds"); do
    port=$((29700 + r))
    run overlap "$work/o.log" "$build/bin/cifar-train" launch -n 2 --master-port $port \
      $(train_flags "$m" "$work/o-$m-$r") --bucket-cap-mb $bucket_mb
    echo "$m overlap $(step_seconds "$work/o.log")" >>"$results"
    run no-overlap "$work/n.log" "$build/bin/cifar-train" launch -n 2 --master-port $port \
      $(train_flags "$m" "$work/n-$m-$r") --bucket-cap-mb $bucket_mb --no-overlap
    echo "$m no-overlap $(step_seconds "$work/n.log")" >>"$results"
    # The limit: the same two per-rank steps side by side, nothing exchanged.
    "$build/bin/cifar-train" $(train_flags "$m" "$work/a-$m-$r") >"$work/a.log" 2>&1 &
    first=$!
    "$build/bin/cifar-train" $(train_flags "$m" "$work/b-$m-$r") >"$work/b.log" 2>&1
    wait $first
    cat "$work/a.log" "$work/b.log" >"$work/l.log"
    echo "$m limit $(step_seconds "$work/l.log")" >>"$results"
    /usr/bin/python3 "$here/allreduce_ddp.py" --model "$m" --batch-size $batch --steps "$steps" \
      --bucket-cap-mb $bucket_mb --master-port $((port + 100)) >"$work/p.log" 2>&1 ||
      { cat "$work/p.log"; exit 1; }
    echo "$m ddp $(/usr/bin/python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["step_seconds"])' "$work/p.log")" >>"$results"
  done
done

/usr/bin/python3 - "$results" "$build" "$steps" "$rounds" "${models[*]}" <<'PY'
import collections, statistics, sys
path, build, steps, rounds, models = sys.argv[1:]
runs = collections.defaultdict(list)
for line in open(path):
    model, side, seconds = line.split()
    runs[(model, side)].append(float(seconds))
med = {k: statistics.median(v) for k, v in runs.items()}
print(f"Two ranks on one machine, per-rank batch 64 (global 128), 1 intra-op thread per rank, "
      f"{steps} steps after 3 warm-up steps, median of {rounds} alternating rounds; step time in ms.\n")
print("| model | cifar-train overlap | cifar-train no overlap | no communication (limit) "
      "| PyTorch DDP (Python) | overlap / limit | no overlap / limit | cifar-train / DDP |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for m in models.split():
    o, n, l, d = (med[(m, s)] for s in ("overlap", "no-overlap", "limit", "ddp"))
    print(f"| {m} | {o*1e3:.0f} | {n*1e3:.0f} | {l*1e3:.0f} | {d*1e3:.0f} | {o/l:.3f} | {n/l:.3f} "
          f"| {o/d:.3f} |")
print("\nEvery round (overlap / no overlap / limit / DDP, ms):")
for m in models.split():
    rows = zip(*(runs[(m, s)] for s in ("overlap", "no-overlap", "limit", "ddp")))
    print(f"- {m}: " + ", ".join(" / ".join(f"{x*1e3:.0f}" for x in r) for r in rows))
print(f"\nCommand: ROUNDS={rounds} bench/allreduce_step.sh {build} {steps} {models}")
PY
