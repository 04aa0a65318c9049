#!/usr/bin/env bash
# Checkpoints in object storage against a local volume (issue 40): save and load times for each
# model (bench-checkpoint-store), then cifar-train's images/s with --checkpoint-every 100 into a
# directory, into the bucket, and without periodic checkpoints, on the same synthetic data. The
# bucket is a local SeaweedFS (deploy/object-store), started here and stopped at the end. Prints
# markdown tables.
#   bench/checkpoint_store.sh [BUILD_DIR]     MODELS=resnet20,alexnet RUNS=10 EPOCHS=2 THREADS=2
#                                               ROUNDS=5 (training: each setting once a round)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
models=${MODELS:-resnet20,alexnet}
runs=${RUNS:-10}
epochs=${EPOCHS:-2}
threads=${THREADS:-2}
rounds=${ROUNDS:-5}
for bin in bench-checkpoint-store cifar-train; do
  [ -x "$build/bin/$bin" ] || { echo "missing $build/bin/$bin: build it first" >&2; exit 1; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-checkpoints.XXXXXX")
trap 'deploy/object-store/stop.sh "$work/store"; rm -rf "$work"' EXIT
deploy/object-store/start.sh "$work/store" --bucket bench --tls >&2
set -a
# shellcheck disable=SC1091
source "$work/store/credentials.env"
AWS_ENDPOINT_URL=$(cat "$work/store/endpoint")
set +a

echo "### Save and load (median of $runs, one thread), the store over http"
echo
"$build/bin/bench-checkpoint-store" --dir "$work/volume" --uri s3://bench/store \
  --models "$models" --runs "$runs"
echo
echo "### The same, the store over https (its own CA; bodies sent UNSIGNED-PAYLOAD)"
echo
AWS_ENDPOINT_URL=$(cat "$work/store/endpoint-https") AWS_CA_BUNDLE="$work/store/ca.pem" \
  "$build/bin/bench-checkpoint-store" --dir "$work/volume-2" --uri s3://bench/store-tls \
  --models "$models" --runs "$runs"

echo
echo "### The server's own floor: a bare PUT by curl (no hashing, no fence, no rotation; median of $runs)"
echo
echo "| object | PUT, http |"
echo "|---:|---:|"
floor() {  # floor BYTES: a row
  head -c "$1" /dev/urandom >"$work/blob"
  local i times=()
  for i in $(seq "$runs"); do
    times+=("$(curl -s -o /dev/null -w '%{time_total}' -X PUT --aws-sigv4 aws:amz:us-east-1:s3 \
      --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
      --data-binary @"$work/blob" "$AWS_ENDPOINT_URL/bench/floor-$i")")
  done
  printf '| %.1f MB | %.1f ms |\n' "$(awk -v b="$1" 'BEGIN {print b / 1e6}')" \
    "$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] * 1000}')"
}
floor 2300000
floor 14100000

echo
echo "### Training with --checkpoint-every 100 (resnet20, synthetic 5000 images, $epochs epochs, $threads threads; $rounds rounds, the three alternated)"
echo
echo "| checkpoints | images/s, median | min - max | share of step time outside compute, median |"
echo "|---|---:|---:|---:|"
train() {  # train NAME MODEL_DIR [FLAGS...]: appends "IMAGES_PER_S OTHER_PERCENT" to $work/NAME.rows
  local name=$1 dir=$2
  shift 2
  local log="$work/row.log"
  rm -rf "$dir" 2>/dev/null || true
  "$build/bin/cifar-train" -m resnet20 -d synthetic --data-dir "$work/data" -e "$epochs" -b 64 \
    -t "$threads" --progress none --metrics-port -1 -md "$dir" "$@" >"$log" 2>&1 ||
    { cat "$log" >&2; exit 1; }
  echo "$(sed -n 's/.*done: .* steps, \([0-9.]*\) img\/s.*/\1/p' "$log")" \
    "$(sed -n 's/.*step time: .*other \([0-9.]*\)%.*/\1/p' "$log")" >>"$work/$name.rows"
}
row() {  # row NAME LABEL: the median, range and median share of NAME's rounds
  local ips other
  ips=$(cut -d' ' -f1 "$work/$1.rows" | sort -g | awk '{v[NR]=$1} END {
    printf "%.1f | %.1f - %.1f", v[int((NR+1)/2)], v[1], v[NR]}')
  other=$(cut -d' ' -f2 "$work/$1.rows" | sort -g | awk '{v[NR]=$1} END {printf "%.1f", v[int((NR+1)/2)]}')
  echo "| $2 | $ips | $other% |"
}
for round in $(seq "$rounds"); do
  train none "$work/none-$round"
  train volume "$work/every-$round" --checkpoint-every 100
  train s3 "s3://bench/every-$round" --checkpoint-every 100
done
row none "each epoch's only"
row volume "every 100 steps, volume"
row s3 "every 100 steps, S3"
