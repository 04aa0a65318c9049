#!/usr/bin/env bash
# A dataset read from object storage (issue 59). CIFAR-10 (the whole set, scripts/cifar10-data.sh)
# is put into a bucket of a local SeaweedFS (deploy/object-store, started here, stopped at the
# end), then:
#   1. the fetch into an empty directory (bench-dataset-fetch: data/s3_fetch.h, what each pod of a
#      job with dataset.uri runs) with 1, 2, 4 and 8 ranged GETs in flight, against bare curl GETs
#      of the same six objects (SigV4, into files), one after another, all six at once, and one
#      after another followed by md5sum; over loopback, then with the store's port shaped (tc
#      htb, RATE each way; root) like a link to a store elsewhere;
#   2. cifar-train's start-to-first-step time (launch to its first step's log line; simplecnn,
#      batch 64) with --data-uri into an empty cache, against --data-dir on the local files.
# Each setting RUNS times, alternated; medians. Prints markdown tables.
#   bench/dataset_fetch.sh [BUILD_DIR]     RUNS=5 STREAMS=1,2,4,8 RATE=1gbit
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-5}
streams=${STREAMS:-1,2,4,8}
rate=${RATE:-1gbit}
for bin in bench-dataset-fetch cifar-train; do
  [ -x "$build/bin/$bin" ] || { echo "missing $build/bin/$bin: build it first" >&2; exit 1; }
done
data=$(scripts/cifar10-data.sh)
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-dataset-fetch.XXXXXX")
trap 'deploy/object-store/stop.sh "$work/store"; rm -rf "$work"' EXIT
deploy/object-store/start.sh "$work/store" --bucket bench --put "$data=bench/cifar10" >&2
set -a
# shellcheck disable=SC1091
source "$work/store/credentials.env"
AWS_ENDPOINT_URL=$(cat "$work/store/endpoint")
set +a
objects=(data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin
  test_batch.bin)
bytes=$(cd "$data" && cat "${objects[@]}" | wc -c)
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
now() { date +%s.%N; }

# curl GETs of the six objects into $work/curl: --parallel for all at once.
curl_get() {
  rm -rf "$work/curl" && mkdir -p "$work/curl"
  local args=() object
  for object in "${objects[@]}"; do
    args+=(-o "$work/curl/$object" "$AWS_ENDPOINT_URL/bench/cifar10/$object")
  done
  curl -sf --no-progress-meter --aws-sigv4 aws:amz:us-east-1:s3 --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    "$@" "${args[@]}"
}
curl_then_md5sum() { curl_get && (cd "$work/curl" && md5sum "${objects[@]}"); }
timed() {  # timed CMD...: the seconds it took
  local start
  start=$(now)
  "$@" >/dev/null
  awk -v a="$start" -v b="$(now)" 'BEGIN {print b - a}'
}
# One table: the fetch per ranged GETs in flight, then curl alone and curl followed by md5sum (the
# same check the fetch makes: each file's MD5 against its ETag).
fetch_table() {
  local sequential=() parallel=() checked=() _
  for _ in $(seq "$runs"); do
    sequential+=("$(timed curl_get)")
    parallel+=("$(timed curl_get --parallel --parallel-max 6)")
    checked+=("$(timed curl_then_md5sum)")
  done
  (cd "$work/curl" && cmp -s <(cat "${objects[@]}") <(cd "$data" && cat "${objects[@]}")) ||
    { echo "curl's copies differ from the files put" >&2; exit 1; }
  "$build/bin/bench-dataset-fetch" --uri s3://bench/cifar10 --dir "$work/fetched" \
    --streams "$streams" --runs "$runs"
  local row
  for row in "curl, one object after another:$(printf '%s\n' "${sequential[@]}" | median)" \
    "curl --parallel, six at once:$(printf '%s\n' "${parallel[@]}" | median)" \
    "curl one after another, then md5sum:$(printf '%s\n' "${checked[@]}" | median)"; do
    awk -v name="${row%%:*}" -v s="${row#*:}" -v b="$bytes" \
      'BEGIN {printf "| %s | %.2f s | %.0f MB/s |\n", name, s, b / 1e6 / s}'
  done
}
echo "### Fetching CIFAR-10 ($(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB, six objects) from a local SeaweedFS over loopback"
echo
fetch_table
# The same through a link like a store's elsewhere: the store's port shaped on loopback to RATE
# each way (an htb class; this kernel has no netem for latency), so that the network, not the 2
# cores, bounds the transfer.
port=${AWS_ENDPOINT_URL##*:}
tc qdisc add dev lo root handle 1: htb default 10
trap '{ tc qdisc del dev lo root 2>/dev/null || true; }; deploy/object-store/stop.sh "$work/store"; rm -rf "$work"' EXIT
tc class add dev lo parent 1: classid 1:10 htb rate 100gbit quantum 60000  # the rest, as it was
tc class add dev lo parent 1: classid 1:20 htb rate "$rate" ceil "$rate" burst 1mb quantum 60000
for match in sport dport; do
  tc filter add dev lo parent 1: protocol ip u32 match ip "$match" "$port" 0xffff flowid 1:20
done
echo
echo "### The same, the store's port shaped to $rate each way"
echo
fetch_table
tc qdisc del dev lo root

# Launch to the first step's log line (--log-every 1), then the process is stopped.
first_step() {
  local start line seen=0
  start=$(now)
  coproc train { exec "$build/bin/cifar-train" -m simplecnn -d cifar10 -nc 10 -b 64 -e 1 \
    --log-every 1 -md "$work/model" "$@" 2>&1; }
  local pid=$train_PID
  while IFS= read -r line <&"${train[0]}"; do
    echo "$line" >>"$work/first-step.log"
    if [[ $line == *" step 1 ("* ]]; then seen=1; break; fi
  done
  local took
  took=$(awk -v a="$start" -v b="$(now)" 'BEGIN {print b - a}')
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$work/model"
  ((seen)) || { echo "cifar-train ended before its first step:" >&2; cat "$work/first-step.log" >&2; exit 1; }
  rm -f "$work/first-step.log"
  echo "$took"
}
from_bucket=() from_volume=()
for _ in $(seq "$runs"); do
  rm -rf "$work/cache"
  from_bucket+=("$(first_step --data-uri s3://bench/cifar10 --data-dir "$work/cache")")
  from_volume+=("$(first_step --data-dir "$data")")
done
echo
echo "### cifar-train from launch to its first step (simplecnn, batch 64; median of $runs)"
echo
echo "| data | to first step |"
echo "|---|---:|"
printf '| local files (--data-dir, a volume in a pod) | %.2f s |\n' \
  "$(printf '%s\n' "${from_volume[@]}" | median)"
printf '| the bucket (--data-uri into an empty cache, an emptyDir in a pod) | %.2f s |\n' \
  "$(printf '%s\n' "${from_bucket[@]}" | median)"
