#!/usr/bin/env bash
# Two builds of cifar-train side by side: the same training runs with each, alternated round by
# round so that both see the same machine, for a refactoring that must not change performance.
# Prints the median images/s after warm-up (all trainers together) per run and build.
#   single:    one process, synthetic data, batch 128, 2 threads
#   ps-sync / ps-async: the master and one worker against one PS shard, batch 32, 1 thread each
#   allreduce: two ranks (launch -n 2, Gloo), batch 64, 1 thread each
# Usage: bench/compare_builds.sh BEFORE_BIN AFTER_BIN [rounds]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
before=${1:?usage: bench/compare_builds.sh BEFORE_BIN AFTER_BIN [rounds]}
after=${2:?usage: bench/compare_builds.sh BEFORE_BIN AFTER_BIN [rounds]}
rounds=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data="$work/data"

# The sum over a log's "(X img/s after warm-up)" lines: one per trainer.
images_per_second() {
  grep -o '([0-9.]* img/s after warm-up)' "$1" | tr -d '(' | awk '{ s += $1 } END { print s }'
}

single() {  # bin, model, log
  "$1" -m "$2" -d synthetic --data-dir "$data" --synthetic-train-size 3072 \
    --synthetic-test-size 128 -md "$work/m-$RANDOM" -b 128 -t 2 --max-steps 23 -e 1 \
    --progress none --metrics-port -1 >"$3" 2>&1
}
parameter_server() {  # bin, mode, log
  "$here/../scripts/local-job.sh" --bin "$1" --ps 1 --workers 1 --port 7760 --no-evaluator -- \
    -m simplecnn -d synthetic --data-dir "$data" --synthetic-train-size 4096 \
    --synthetic-test-size 64 -e 1 -b 32 --lr 0.005 --schedule constant --ps-mode "$2" \
    --threads 1 --workers 1 -md "$work/m-$RANDOM" --metrics-port -1 --progress none >"$3" 2>&1
}
allreduce() {  # bin, model, log
  "$1" launch -n 2 --master-port 29790 -m "$2" -d synthetic --data-dir "$data" \
    --synthetic-train-size 3072 --synthetic-test-size 64 -md "$work/m-$RANDOM" -b 64 -t 1 \
    --workers 1 --max-steps 23 -e 1 --progress none --metrics-port -1 >"$3" 2>&1
}

runs=("single simplecnn" "single resnet20" "parameter_server sync" "parameter_server async"
      "allreduce resnet20")
results="$work/results.txt"
for r in $(seq "$rounds"); do
  for run in "${runs[@]}"; do
    for side in before after; do
      bin=$before
      [ "$side" = after ] && bin=$after
      log="$work/log"
      # shellcheck disable=SC2086  # $run is the function and its argument
      set -- $run
      "$1" "$bin" "$2" "$log" || { cat "$log"; exit 1; }
      echo "$run|$side|$(images_per_second "$log")" >>"$results"
    done
  done
done

/usr/bin/python3 - "$results" "$rounds" "$before" "$after" <<'PY'
import statistics, sys
path, rounds, before, after = sys.argv[1:]
rows = {}
for line in open(path):
    run, side, ips = line.strip().split("|")
    rows.setdefault(run, {}).setdefault(side, []).append(float(ips))
print(f"Images/s after warm-up, median of {rounds} alternating rounds.\n")
print("| run | before | after | after / before |")
print("|---|---|---|---|")
for run, sides in rows.items():
    b, a = statistics.median(sides["before"]), statistics.median(sides["after"])
    print(f"| {run.replace('_', ' ')} | {b:.0f} | {a:.0f} | {a / b:.2f} |")
PY
echo
echo "Command: bench/compare_builds.sh $before $after $rounds ($(nproc) cores)"
