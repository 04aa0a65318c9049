#!/usr/bin/env bash
# What the parameter-server channel's mutual TLS costs, side by side with plaintext in one run:
# push+pull throughput of one PS (bench-ps-push-pull ... tls: alexnet and resnet20, plaintext and
# TLS alternately, medians of three), then images/s of a whole sync PS job (a PS, the master and
# one worker, one intra-op thread each) with the job's own credentials and with --insecure,
# alternately, twice each. resnet20 on synthetic data, 2048 images (one epoch, batch 32 per
# trainer).
# Usage: bench/ps_tls.sh [build-dir]
set -euo pipefail
build=${1:-build}
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/bin/bench-ps-push-pull" 40 all tls
echo
echo "| sync PS job (resnet20, 1 PS, 2 trainers) | run | images/s (both trainers, after warm-up) | wall s |"
echo "|---|---:|---:|---:|"
for run in 1 2; do
  for channel in tls plaintext; do
    rm -rf "$work/model"
    flags=()
    [ "$channel" = plaintext ] && flags=(--insecure)
    start=$(date +%s.%N)
    "$here/../scripts/local-job.sh" --bin "$build/bin/cifar-train" --ps 1 --workers 1 --port 7800 \
      --no-evaluator -- -m resnet20 -d synthetic --synthetic-train-size 2048 \
      --synthetic-test-size 64 -e 1 -b 32 --lr 0.01 --schedule constant --ps-mode sync \
      --threads 1 --workers 1 -md "$work/model" --metrics-port -1 --progress none "${flags[@]}" \
      > "$work/log" 2>&1
    end=$(date +%s.%N)
    /usr/bin/python3 - "$work/log" "$channel" "$run" "$start" "$end" <<'PY'
import re, sys
log, channel, run, start, end = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
text = open(log).read()
rates = [float(m) for m in re.findall(r"\(([\d.]+) img/s after warm-up\)", text)]
assert len(rates) == 2, text
print(f"| {channel} | {run} | {sum(rates):.1f} | {end - start:.1f} |")
PY
  done
done
echo
echo "Command: bench/ps_tls.sh $build ($(nproc) cores)"
