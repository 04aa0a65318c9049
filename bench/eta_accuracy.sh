#!/usr/bin/env bash
# The ETA of `kubectl get ctj` against the real end of the README's example job: runs
# deploy/examples/ps-job.yaml on the cluster of $KUBECONFIG (the README's "Run it on Kubernetes",
# steps 1-3, done first: operator, CRD, volumes), reads status.progress every 10 s into a poll
# log, then compares every estimate with the moment the job was seen Succeeded
# (bench/eta_accuracy.py). 520 = the example's sync updates: 2 epochs of 50000 / 3 trainers / 64.
# Usage: bench/eta_accuracy.sh [poll-log]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log=${1:-eta-poll.log}
: >"$log"
kubectl apply -f "$here/../deploy/examples/ps-job.yaml"
start=$(date +%s)
while true; do
  reading=$(kubectl get ctj cifar10-ps -o json | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin).get("status", {}); p = s.get("progress", {})
print(s.get("state"), p.get("step"), p.get("progressPercentage"),
      p.get("estimatedRemainingSeconds"), p.get("updatedAt"))')
  echo "$(($(date +%s) - start)) $reading" >>"$log"
  case "$reading" in Succeeded* | Failed*) break ;; esac
  sleep 10
done
/usr/bin/python3 "$here/eta_accuracy.py" "$log" 520
echo
echo "Command: bench/eta_accuracy.sh $log"
