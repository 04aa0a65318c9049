#!/usr/bin/env bash
# Stops what start.sh started in DIR (by the pids it saved, never by name).
#   tests/integration/control-plane/stop.sh DIR
set -uo pipefail
[ -f "$1/pids" ] || exit 0
while read -r pid; do kill "$pid" 2>/dev/null; done <"$1/pids"
for _ in $(seq 50); do
  alive=0
  while read -r pid; do kill -0 "$pid" 2>/dev/null && alive=1; done <"$1/pids"
  [ $alive -eq 0 ] && break
  sleep 0.2
done
while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$1/pids"
rm -f "$1/pids"
