#!/usr/bin/env bash
# ctest Grafana.Dashboard: checks deploy/grafana/cifartrain.json with Grafana's SDK (drift from
# dashboard.py, the SDK's schema, panels, queries: see check_dashboard.py). Uses the SDK's venv
# as deploy/grafana/setup-sdk.sh left it and downloads nothing: without it, fails saying to run
# the setup. --with-promtool also parses every query with promtool, from deploy/tools/build.sh
# prometheus (which must be warm: a test must not build it).
#   tests/monitoring/grafana-dashboard.sh [--with-promtool]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python=$("$root/deploy/grafana/setup-sdk.sh" --check)
args=()
if [ "${1:-}" = --with-promtool ]; then
  args=(--promtool "$("$root/deploy/tools/build.sh" prometheus)/promtool")
fi
exec "$python" "$root/tests/monitoring/check_dashboard.py" "$root" "${args[@]}"
