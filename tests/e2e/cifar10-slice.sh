#!/usr/bin/env bash
# The slice of real CIFAR-10 the end-to-end jobs train on (scripts/cifar10-data.sh --slice: the
# first N records of each training batch and M test records), made world-readable: the pods run
# as UID 65532 and mount it from the host.
#   tests/e2e/cifar10-slice.sh OUT [N=300] [M=100]
# (100 test images: the evaluator of every PS job evaluates them after every checkpoint, and
# checkpoints come every few steps, so that with 300 an evaluator used as much CPU as a trainer;
# an accuracy over 100 tells what the tests check: that there is one, above 0)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
"$here/../../scripts/cifar10-data.sh" --slice "$out" "${2:-300}" "${3:-100}" >/dev/null
chmod -R a+rX "$out"
for dir in "$out" "$(dirname "$out")"; do chmod a+x "$dir"; done
echo "$out"
