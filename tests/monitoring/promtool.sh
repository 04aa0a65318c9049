#!/usr/bin/env bash
# Runs the pinned promtool (Prometheus from deploy/tools/prometheus/go.mod, built and cached by
# deploy/tools/build.sh; the first call builds it, several minutes on 2 cores) with the given
# arguments, from the repository root so that relative paths name repository files.
#   tests/monitoring/promtool.sh check config deploy/prometheus/prometheus.yml
#   tests/monitoring/promtool.sh test rules deploy/prometheus/tests/cifartrain-alerts_test.yaml
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$("$repo/deploy/tools/build.sh" prometheus)
cd "$repo"
exec "$bin/promtool" "$@"
