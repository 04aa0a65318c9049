#!/usr/bin/env bash
# Real CIFAR-10 for the demo, the tests and the benchmarks, in the official binary layout that
# `cifar-train -d cifar10 --data-dir DIR` reads. The source is the JPEG copy of CIFAR-10 beside
# the repository (../shared/data/cifar10, or $CIFAR10_SOURCE), decoded once by its make-binary.sh
# into a cache outside the repository ($CIFAR_DATA_CACHE, default ~/.cache/cifartrain/data).
# Nothing is downloaded.
#
#   scripts/cifar10-data.sh                    prints the directory of the whole set
#                                              (50,000 train, 10,000 test)
#   scripts/cifar10-data.sh --slice OUT N M    writes OUT/cifar-10-batches-bin: the first N records
#                                              of each of the five training batches and the first
#                                              M test records; prints that directory
#
# Exit status 3 when the source is not there (the demo then falls back to another dataset).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=${CIFAR10_SOURCE:-$here/../../shared/data/cifar10}
if [ ! -f "$source_dir/make-binary.sh" ]; then
  echo "cifar10-data.sh: no CIFAR-10 JPEG copy at $source_dir (../shared/data/cifar10 beside the" \
    "repository, or set CIFAR10_SOURCE)" >&2
  exit 3
fi
cache=${CIFAR_DATA_CACHE:-$HOME/.cache/cifartrain/data}/cifar10
# make-binary.sh returns at once when the cache is complete; it writes test_batch.bin last. The
# lock keeps concurrent callers (ctest -j) from decoding into the same files at once.
mkdir -p "$cache"
(
  flock 9
  bash "$source_dir/make-binary.sh" "$cache" >&2
) 9>"$cache/.lock"
full="$cache/cifar-10-batches-bin"
if (($# == 0)); then
  echo "$full"
  exit 0
fi

[[ $1 == --slice && $# == 4 ]] || { echo "usage: $0 [--slice OUT N M]" >&2; exit 2; }
out=$2/cifar-10-batches-bin
per_batch=$3
test_records=$4
record=3073  # a label byte and 32x32x3 pixels
mkdir -p "$out"
for i in 1 2 3 4 5; do
  head -c $((record * per_batch)) "$full/data_batch_$i.bin" >"$out/data_batch_$i.bin"
done
head -c $((record * test_records)) "$full/test_batch.bin" >"$out/test_batch.bin"
cp "$full/batches.meta.txt" "$out/"
echo "$out"
