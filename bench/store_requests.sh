#!/usr/bin/env bash
# What a job costs its object store in requests (issue 55: S3 bills per request and per byte): a
# parameter-server job with an evaluator (scripts/local-job.sh: 1 PS, the master, 1 worker, the
# evaluator; resnet20 on synthetic data, a checkpoint every 100 steps) into a bucket of a local
# SeaweedFS whose own metrics count the requests it served by type (SeaweedFS_s3_request_total).
# Prints a markdown table: each type's count and its rate per minute of the job, for each binary
# given (an older build beside the current one: the same job on the same machine, alternated).
#   bench/store_requests.sh [BIN...]     (default build/bin/cifar-train)   EPOCHS=2 ROUNDS=1
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
((${#bins[@]})) || bins=(build/bin/cifar-train)
epochs=${EPOCHS:-2}
rounds=${ROUNDS:-1}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-store-requests.XXXXXX")
trap 'deploy/object-store/stop.sh "$work/store"; rm -rf "$work"' EXIT
metrics_port=$((23000 + RANDOM % 2000))
deploy/object-store/start.sh "$work/store" --bucket bench --metrics-port "$metrics_port" >&2
set -a
# shellcheck disable=SC1091
source "$work/store/credentials.env"
AWS_ENDPOINT_URL=$(cat "$work/store/endpoint")
set +a

# The store's request counts so far, "TYPE COUNT" a line, summed over codes and buckets.
counts() {
  curl -s "http://127.0.0.1:$metrics_port/metrics" |
    sed -n 's/^SeaweedFS_s3_request_total{\(.*\)} \([0-9.e+]*\)$/\1 \2/p' |
    sed 's/.*type="\([^"]*\)".* \([0-9.e+]*\)$/\1 \2/' |
    awk '{n[$1] += $2} END {for (t in n) printf "%s %d\n", t, n[t]}' | sort
}

echo "| build | request type | requests | per minute of the job |"
echo "|---|---|---:|---:|"
for round in $(seq "$rounds"); do
  for bin in "${bins[@]}"; do
    counts >"$work/before"
    start=$(date +%s.%N)
    scripts/local-job.sh --bin "$bin" --ps 1 --workers 1 --port $((7800 + RANDOM % 100)) -- \
      -m resnet20 -d synthetic --data-dir "$work/data" --synthetic-train-size 6400 \
      --synthetic-test-size 500 -e "$epochs" -b 32 -t 1 --checkpoint-every 100 \
      -md "s3://bench/run-$round-$RANDOM" --metrics-port -1 --progress none >"$work/job.log" 2>&1 ||
      { tail -30 "$work/job.log" >&2; exit 1; }
    minutes=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {print (e - s) / 60}')
    counts >"$work/after"
    join -a 2 -e 0 -o 0,1.2,2.2 "$work/before" "$work/after" |
      awk -v bin="$bin" -v m="$minutes" '{d = $3 - $2; if (d > 0)
        printf "| %s (%.1f min) | %s | %d | %.1f |\n", bin, m, $1, d, d / m}'
  done
done
