#!/usr/bin/env bash
# Stops the object store start.sh started in RUN_DIR (by its pid, never by name); its data stays.
#   deploy/object-store/stop.sh RUN_DIR
set -uo pipefail
run=${1:?usage: stop.sh RUN_DIR}
[ -f "$run/pid" ] || exit 0
pid=$(cat "$run/pid")
kill "$pid" 2>/dev/null
for _ in $(seq 50); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
kill -9 "$pid" 2>/dev/null
rm -f "$run/pid"
