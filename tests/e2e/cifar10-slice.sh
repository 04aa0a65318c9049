#!/usr/bin/env bash
# A small slice of real CIFAR-10 for the end-to-end jobs: the first N records of each of the five
# training batches and the first M of the test batch, in the official binary layout that
# `cifar-train -d cifar10` reads (OUT/cifar-10-batches-bin). The full binary set is decoded once
# from ../shared/data/cifar10 (beside the repository; its make-binary.sh) into a cache outside
# the repository; nothing is downloaded. Files are made world-readable: the pods run as UID 65532.
#   tests/e2e/cifar10-slice.sh OUT [N=300] [M=1000]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
per_batch=${2:-300}
test_records=${3:-1000}
source_dir="$here/../../../shared/data/cifar10"
[ -f "$source_dir/make-binary.sh" ] ||
  { echo "cifar10-slice.sh: no CIFAR-10 at $source_dir (../shared/data/cifar10 beside the repository)" >&2; exit 1; }
cache=${CIFAR_DATA_CACHE:-$HOME/.cache/cifartrain/data}/cifar10
bash "$source_dir/make-binary.sh" "$cache" >&2
record=3073  # a label byte and 32x32x3 pixels
mkdir -p "$out/cifar-10-batches-bin"
for i in 1 2 3 4 5; do
  head -c $((record * per_batch)) "$cache/cifar-10-batches-bin/data_batch_$i.bin" >"$out/cifar-10-batches-bin/data_batch_$i.bin"
done
head -c $((record * test_records)) "$cache/cifar-10-batches-bin/test_batch.bin" >"$out/cifar-10-batches-bin/test_batch.bin"
cp "$cache/cifar-10-batches-bin/batches.meta.txt" "$out/cifar-10-batches-bin/" 2>/dev/null || true
chmod -R a+rX "$out"
for dir in "$out" "$(dirname "$out")"; do chmod a+x "$dir"; done
echo "$out"
