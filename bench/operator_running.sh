#!/usr/bin/env bash
# What 100 running jobs cost an operator, this build's cifar-operator against an earlier revision's
# (BEFORE, default 4c33e53: the last commit before issue 28, whose progress scraper patched
# status.progress itself beside the reconcile's resourceVersion-guarded status patches, and whose
# work queue kept a delayed entry per reconcile). Both on the same real kube-apiserver + etcd (a
# private control plane), each in turn with JOBS running jobs (bench-operator-running plays their
# kubelet and serves their metrics endpoint), --progress-interval 1 (15x the default, to make a
# storm visible), for SECONDS.
#   bench/operator_running.sh [build-dir] [jobs]      SECONDS_WINDOW=60 BEFORE=<git rev>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-build}
jobs=${2:-100}
seconds=${SECONDS_WINDOW:-60}
before=${BEFORE:-4c33e53}
# The earlier operator, built once from its revision (cached by revision).
cache=${XDG_CACHE_HOME:-$HOME/.cache}/cifartrain/bench-operator-$before
if [ ! -x "$cache/build/bin/cifar-operator" ]; then
  rm -rf "$cache"
  mkdir -p "$cache"
  git -C "$root" archive "$before" | tar -x -C "$cache" --one-top-level=src
  cmake -S "$cache/src" -B "$cache/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCIFAR_WERROR=OFF >/dev/null
  cmake --build "$cache/build" --target cifar-operator -j 2 >/dev/null
fi

# shellcheck source=bench/support/control_plane.sh
. "$here/support/control_plane.sh"
k wait --for=condition=Established --timeout=60s crd/cifartrainjobs.cifartrain.io >/dev/null

run() {  # name, operator binary, namespace
  local health metrics log=$work/$1.log
  health=$(free_port)
  metrics=$(free_port)
  "$2" --kubeconfig "$kubeconfig" --namespace "$3" --no-leader-elect --progress-interval 1 \
    --metrics-port "$metrics" --health-port "$health" >"$log" 2>&1 &
  operator_pid=$!
  for _ in $(seq 600); do [ "$(curl -s "http://127.0.0.1:$health/readyz")" = ok ] && break; sleep 0.1; done
  "$root/$build/bin/bench-operator-running" --kubeconfig "$kubeconfig" --namespace "$3" \
    --jobs "$jobs" --seconds "$seconds" --operator-pid "$operator_pid" \
    --operator-metrics "http://127.0.0.1:$metrics/metrics" || { cat "$log" >&2; exit 1; }
  kill "$operator_pid"; wait "$operator_pid" 2>/dev/null || true
  operator_pid=""
  k -n "$3" delete cifartrainjobs,pods --all --wait=false >/dev/null
}
echo "| operator | reconciles/min | 409 conflicts/min | errors/min | status writes/min | max queue depth | max delayed entries | CPU s | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for which in before after; do
  if [ $which = before ]; then binary=$cache/build/bin/cifar-operator; label="$before (before)"
  else binary=$root/$build/bin/cifar-operator; label="$(git -C "$root" rev-parse --short HEAD) (after)"; fi
  line=$(run "$which" "$binary" "bench-running-$which")
  echo "$which: $line" >&2
  python3 - "$label" "$line" <<'PY'
import sys
v = dict(f.split("=") for f in sys.argv[2].split())
print(f"| {sys.argv[1]} | {float(v['reconciles_per_min']):.0f} | {float(v['conflicts_per_min']):.1f} | "
      f"{float(v['errors_per_min']):.1f} | {float(v['status_writes_per_min']):.0f} | {v['max_queue_depth']} | "
      f"{v['max_delayed']} | {float(v['cpu_s']):.1f} | {float(v['peak_rss_mib']):.1f} |")
PY
done
