#!/usr/bin/env bash
# Installs Grafana's dashboard SDK (grafana-foundation-sdk, pinned in requirements.txt beside this
# script) into a virtual environment outside the repository, for deploy/grafana/dashboard.py and
# its test (tests/monitoring). Idempotent: the venv carries a stamp of requirements.txt, so a
# second run does nothing and a new pin reinstalls. Never touches the system Python.
# Prints the venv's python. --check installs nothing: it fails, saying what to run, unless the
# venv is there at the pin (what tests use: no download at test time).
#   deploy/grafana/setup-sdk.sh [--check]
#   "$(deploy/grafana/setup-sdk.sh)" deploy/grafana/dashboard.py --out deploy/grafana/cifartrain.json
# Env: CIFAR_GRAFANA_VENV (default ~/.cache/cifartrain/venv-grafana), PYTHON (default python3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${CIFAR_GRAFANA_VENV:-$HOME/.cache/cifartrain/venv-grafana}
requirements=$here/requirements.txt
stamp=$venv/.requirements.sha256
want=$(sha256sum <"$requirements" | cut -d' ' -f1)

if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
if [ "${1:-}" = --check ]; then
  echo "setup-sdk: Grafana's SDK is not installed at the pin of deploy/grafana/requirements.txt" \
    "in $venv; run deploy/grafana/setup-sdk.sh first" >&2
  exit 1
fi

echo "setup-sdk: installing $(grep -v '^#' "$requirements" | xargs) into $venv" >&2
# --clear: a venv left by an older pin (or half made) starts over rather than mixing versions.
"${PYTHON:-python3}" -m venv --clear "$venv" >&2
# The machine's configured index (pip.conf / PIP_* variables): nothing is forced here.
"$venv/bin/pip" install --quiet --requirement "$requirements" >&2
"$venv/bin/python" -c 'import grafana_foundation_sdk.builders.dashboard' >&2
echo "$want" >"$stamp"
echo "$venv/bin/python"
