#!/usr/bin/env bash
# Data-pipeline benchmark: cifartrain's threaded loader vs torchvision's DataLoader, same work
# (RandomCrop(32, padding=4), RandomHorizontalFlip, Normalize, batch 128, shuffle) on the same
# 50000 synthetic CIFAR-10-format images. Prints a markdown table.
#
#   bench/data_pipeline.sh [BUILD_DIR]        (default: build)
#   WORKERS=2 EPOCHS=2 TRANSFORMS=pil|tensor  environment overrides
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
WORKERS=${WORKERS:-2}
EPOCHS=${EPOCHS:-2}
TRANSFORMS=${TRANSFORMS:-pil}
BIN="$BUILD_DIR/bin/bench-data-pipeline"
PY=/usr/bin/python3  # Debian's python3-torch / python3-torchvision live here, not in pyenv's

[ -x "$BIN" ] || { echo "missing $BIN: build the bench-data-pipeline target first" >&2; exit 1; }

DATA=$(mktemp -d "${TMPDIR:-/tmp}/bench-data.XXXXXX")
trap 'rm -rf "$DATA"' EXIT
"$BIN" --write-synthetic "$DATA"

CPP_CMD=("$BIN" --data "$DATA" --workers "$WORKERS" --batch 128 --epochs "$EPOCHS")
PY_CMD=("$PY" bench/data_pipeline.py --data "$DATA" --workers "$WORKERS" --batch 128
        --epochs "$EPOCHS" --transforms "$TRANSFORMS")

echo "+ ${CPP_CMD[*]}" >&2
cpp_out=$("${CPP_CMD[@]}")
echo "$cpp_out" >&2
echo "+ ${PY_CMD[*]}" >&2
py_out=$("${PY_CMD[@]}")
echo "$py_out" >&2

field() { awk -v k="$1:" '$1 == k { print $2 }' <<<"$2"; }
cpp_ips=$(field images_per_s "$cpp_out")
cpp_ms=$(field cpu_ms_per_batch "$cpp_out")
py_ips=$(field images_per_s "$py_out")
py_ms=$(field cpu_ms_per_batch "$py_out")
ratio=$(awk -v a="$cpp_ips" -v b="$py_ips" 'BEGIN { printf "%.1f", a / b }')
cpu_ratio=$(awk -v a="$py_ms" -v b="$cpp_ms" 'BEGIN { printf "%.1f", a / b }')
torch_version=$("$PY" -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__)')

cat <<EOF

Data pipeline, 50000 CIFAR-format images, batch 128, crop+flip+normalise, $WORKERS workers,
best of $EPOCHS epochs; $(nproc) cores ($(uname -m)); torch/torchvision $torch_version.

| pipeline | images/s | CPU ms per batch (1 thread) |
|---|---:|---:|
| cifartrain DataLoader (C++) | $cpp_ips | $cpp_ms |
| torchvision DataLoader ($TRANSFORMS transforms) | $py_ips | $py_ms |
| ratio (C++ / torchvision) | ${ratio}x | ${cpu_ratio}x less |

Command: bench/data_pipeline.sh $BUILD_DIR  (WORKERS=$WORKERS EPOCHS=$EPOCHS TRANSFORMS=$TRANSFORMS)
EOF
