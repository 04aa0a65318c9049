#!/usr/bin/env bash
# A rank of a 3-rank all-reduce job killed (SIGKILL) mid-epoch, on this machine's loopback:
# seconds from the kill to the job's next trained step, and the steps trained again, for
#   fixed    the job of a fixed size (WORLD_SIZE 3), its replacement started at once (the best
#            case: on Kubernetes a new pod takes seconds more);
#   elastic  --min-ranks 2 at a rendezvous store of its own, no replacement;
# then, elastic, a new rank started: seconds from its start to the first step the group trains
# with it; then, elastic, a rank frozen (SIGSTOP: its connections stay open, so Gloo alone waits
# out --dist-timeout, 60 s): seconds from the freeze to the next step the others train. alexnet,
# synthetic data, a global batch of 24, one thread per rank; ROUNDS rounds (default 3), medians.
#   bench/elastic_regroup.sh [build-dir]
set -euo pipefail
build=${1:-build}
bin="$build/bin/cifar-train"
rounds=${ROUNDS:-3}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Each line of a command's output prefixed with the time it arrived (epoch seconds).
stamped() {  # log, command...
  local log=$1
  shift
  "$@" 2>&1 | python3 -u -c '
import sys, time
for line in sys.stdin:
    print(f"{time.time():.3f} {line}", end="", flush=True)' >"$log" &
  pids+=($!)
}
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
rank() {  # slot, world, port, model dir, log, extra flags...
  local slot=$1 world=$2 port=$3 dir=$4 log=$5
  shift 5
  stamped "$log" env MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE="$world" RANK="$slot" \
    "$bin" --strategy allreduce -m alexnet -d synthetic --data-dir "$work/data" \
    --synthetic-train-size 576 --synthetic-test-size 64 -md "$dir" -b 8 -e 100 -t 1 --workers 1 \
    --progress lines --log-every 1 --metrics-port -1 --dist-timeout 60 "$@"
}
# "time step" of each step line ("epoch E/N step S (") after the time, in the logs whose names
# start with the prefix (globbed each call: a log appears when its process starts).
steps_after() {  # time, log prefix
  local after=$1
  cat "$2"*.log 2>/dev/null | awk -v t="$after" '$1 > t && /epoch [0-9]+\/[0-9]+ step / {
    for (i = 1; i < NF; i++) if ($i == "step") { print $1, $(i + 1); break } }' | sort -n
}
newest_step() { steps_after 0 "$1" | awk '{ s = $2 > s ? $2 : s } END { print s + 0 }'; }
wait_for_step() {  # step, log prefix
  for _ in $(seq 600); do
    [ "$(newest_step "$2")" -ge "$1" ] && return 0
    sleep 0.1
  done
  echo "no step $1 in $2*.log" >&2
  tail -n 5 "$2"*.log >&2
  exit 1
}
stop_all() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  pkill -9 -f "$bin" 2>/dev/null || true
  wait 2>/dev/null || true
  pids=()
}
# After a kill at `killed`: seconds to the first step trained after the group formed again (the
# first "resumed at step" line after the kill), and the steps trained again (the newest step
# trained before that line, minus the step it resumed at).
measure() {  # killed, log prefix
  local killed=$1 prefix=$2
  for _ in $(seq 600); do
    local resumed first
    resumed=$(cat "$prefix"*.log 2>/dev/null | awk -v t="$killed" '$1 > t && /resumed at step/ {
      for (i = 1; i < NF; i++) if ($i == "step") { print $1, $(i + 1); break } }' | sort -n |
      head -1)
    if [ -n "$resumed" ]; then
      first=$(steps_after "${resumed%% *}" "$prefix" | head -1)
      if [ -n "$first" ]; then
        local before
        before=$(steps_after 0 "$prefix" | awk -v t="${resumed%% *}" '$1 <= t { s = $2 > s ? $2 : s }
          END { print s + 0 }')
        awk -v k="$killed" -v f="${first%% *}" -v b="$before" -v r="${resumed##* }" \
          'BEGIN { printf "%.2f %d\n", f - k, b - r }'
        return 0
      fi
    fi
    sleep 0.1
  done
  echo "no step after the kill" >&2
  exit 1
}

"$bin" -m simplecnn -d synthetic --data-dir "$work/data" --synthetic-train-size 576 \
  --synthetic-test-size 64 -md "$work/warm" --max-steps 1 --progress none --metrics-port -1 \
  >/dev/null 2>&1 # writes the data
results="$work/results.txt"
for r in $(seq "$rounds"); do
  # fixed: rank 0 hosts the store; rank 2 killed, its replacement started at once.
  port=$((29800 + r))
  d="$work/fixed-$r"
  for s in 0 1 2; do rank $s 3 $port "$d" "$work/f$r-$s.log"; done
  wait_for_step 30 "$work/f$r-"
  p2=$(pgrep -f -- "-md $d" | while read -r p; do
    tr '\0' ' ' </proc/"$p"/environ 2>/dev/null | grep -q 'RANK=2 ' && echo "$p"; done | head -1)
  killed=$(now)
  [ -n "$p2" ] && kill -9 "$p2"
  rank 2 3 $port "$d" "$work/f$r-2b.log"
  echo "fixed $(measure "$killed" "$work/f$r-")" >>"$results"
  stop_all

  # elastic: the store a process of its own; slot 2 killed, nobody replaces it; then a newcomer.
  port=$((29900 + r))
  d="$work/elastic-$r"
  stamped "$work/store-$r.log" "$bin" rendezvous-store --port $port
  for s in 0 1 2; do rank $s 3 $port "$d" "$work/e$r-$s.log" --min-ranks 2 --rendezvous-settle 1; done
  wait_for_step 30 "$work/e$r-"
  p2=$(pgrep -f -- "-md $d" | while read -r p; do
    tr '\0' ' ' </proc/"$p"/environ 2>/dev/null | grep -q 'RANK=2 ' && echo "$p"; done | head -1)
  killed=$(now)
  kill -9 "$p2"
  echo "elastic $(measure "$killed" "$work/e$r-")" >>"$results"
  sleep 2
  started=$(now)
  rank 2 3 $port "$d" "$work/e$r-new.log" --min-ranks 2 --rendezvous-settle 1
  for _ in $(seq 600); do grep -q "resumed at step" "$work/e$r-new.log" && break; sleep 0.1; done
  joined=$(grep "resumed at step" "$work/e$r-new.log" | awk 'NR == 1 { print $1 }')
  first=$(steps_after "$joined" "$work/e$r-" | awk 'NR == 1 { print $1 }')
  while [ -z "$first" ]; do
    sleep 0.1
    first=$(steps_after "$joined" "$work/e$r-" | awk 'NR == 1 { print $1 }')
  done
  echo "newcomer $(awk -v s="$started" -v f="$first" 'BEGIN { printf "%.2f 0\n", f - s }')" >>"$results"
  # The newcomer frozen: the others go on once it stopped beating at the store.
  wait_for_step $(($(newest_step "$work/e$r-") + 5)) "$work/e$r-"
  pn=$(pgrep -f -- "-md $d" | while read -r p; do
    tr '\0' ' ' </proc/"$p"/environ 2>/dev/null | grep -q 'RANK=2 ' && echo "$p"; done | tail -1)
  frozen=$(now)
  kill -STOP "$pn"
  echo "frozen $(measure "$frozen" "$work/e$r-")" >>"$results"
  stop_all
done

echo "| case | seconds to the next step (median of $rounds) | steps trained again |"
echo "| --- | --- | --- |"
for c in fixed elastic newcomer frozen; do
  grep "^$c " "$results" | sort -k2 -n | awk -v c="$c" '{ s[NR] = $2; a[NR] = $3 }
    END { m = int((NR + 1) / 2); printf "| %s | %.2f (%s) | %d |\n", c, s[m], s[1] "-" s[NR], a[m] }'
done
