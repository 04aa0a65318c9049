#!/usr/bin/env bash
# Runs the pinned Prometheus with deploy/prometheus's config (rendered by render-config.sh for the
# kubeconfig given) against a real API server, and checks what its Kubernetes service discovery
# and relabelling make of pods like the operator's: the training pod's `metrics` port becomes a
# target of scrape job cifartrain-pods labelled namespace, pod, cifartrain_job, replica_type and
# replica_index (on `up` and on every scraped series); a pod without the job-name label, a port
# with another name and a Succeeded pod are no targets; the operator's pod is cifar-operator's
# target; the alert rules load. No kubelet: the test plays it, giving the pods the status
# (Running, IP 127.0.0.1) a kubelet would, and their `metrics` port is Prometheus's own, so that
# the scrapes succeed. Everything lives in a namespace of its own, deleted at the end.
#   tests/monitoring/discovery.sh KUBECONFIG
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
kubeconfig=${1:?usage: discovery.sh KUBECONFIG}
bin=$("$repo/deploy/tools/build.sh" prometheus)
source "$repo/deploy/local-cluster/lib.sh"
kubectl=(kubectl --kubeconfig "$kubeconfig")
ns=cifartrain-prometheus-test-$$
tmp=$(mktemp -d)
prometheus_pid=
cleanup() {
  [ -n "$prometheus_pid" ] && kill "$prometheus_pid" 2>/dev/null && wait "$prometheus_pid" 2>/dev/null
  # Pods on no node go at once; the namespace stays Terminating where no controller-manager runs.
  "${kubectl[@]}" -n "$ns" delete pods --all --wait=false >/dev/null 2>&1 || true
  "${kubectl[@]}" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "discovery.sh: $*" >&2
  echo "--- the end of Prometheus's log:" >&2
  tail -20 "$tmp/prometheus.log" >&2 || true
  exit 1
}

port=$(free_port)
api=http://127.0.0.1:$port/api/v1
"$repo/deploy/prometheus/render-config.sh" "$kubeconfig" >"$tmp/prometheus.yml"
# Scrape and evaluate every second: the test waits for the first scrapes, not for 15 s ones.
sed -i 's/^\(  scrape_interval:\).*/\1 1s/; s/^\(  evaluation_interval:\).*/\1 1s/; s/^\(  scrape_timeout:\).*/\1 1s/' \
  "$tmp/prometheus.yml"
"$bin/prometheus" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="127.0.0.1:$port" >"$tmp/prometheus.log" 2>&1 &
prometheus_pid=$!
log_dir=$tmp
wait_for prometheus 60 curl -fs "http://127.0.0.1:$port/-/ready"

# pod NAME 'LABELS' 'PORTS' PHASE: a pod as the operator would make it, then the status a kubelet
# would give it.
pod() {
  "${kubectl[@]}" -n "$ns" apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {$2}}
spec:
  containers:
  - {name: main, image: localhost/cifartrain/runtime:dev, ports: [$3]}
POD
  "${kubectl[@]}" -n "$ns" patch pod "$1" --subresource=status --type=merge \
    -p "{\"status\":{\"phase\":\"$4\",\"podIP\":\"127.0.0.1\",\"podIPs\":[{\"ip\":\"127.0.0.1\"}]}}" >/dev/null
}
"${kubectl[@]}" create namespace "$ns" >/dev/null
job_labels='cifartrain.io/job-name: a, cifartrain.io/replica-type: worker, cifartrain.io/replica-index: "1"'
pod a-worker-1 "$job_labels" "{name: metrics, containerPort: $port}, {name: other, containerPort: 1}" Running
pod a-worker-0 "cifartrain.io/job-name: a, cifartrain.io/replica-type: worker, cifartrain.io/replica-index: \"0\"" \
  "{name: metrics, containerPort: $port}" Succeeded
pod stray "app: stray" "{name: metrics, containerPort: $port}" Running
pod cifar-operator-x "app.kubernetes.io/name: cifar-operator" "{name: metrics, containerPort: $port}, {name: health, containerPort: 1}" Running

# Our namespace's active targets (other tests' pods may share the API server), labels and health.
targets() {
  curl -fsG "$api/targets" --data-urlencode state=active |
    jq -cS --arg ns "$ns" '[.data.activeTargets[] | select(.labels.namespace == $ns) | {labels, health}]
                           | sort_by(.labels.pod, .labels.instance)'
}
# Until the pod created last (the operator's) is a target and every target was scraped once: by
# then discovery has seen every earlier pod (one watch, in order) and a wrong target would show.
for _ in $(seq 60); do
  got=$(targets)
  jq -e 'any(.[]; .labels.pod == "cifar-operator-x") and all(.[]; .health != "unknown")' <<<"$got" >/dev/null && break
  sleep 1
done
expected=$(jq -ncS --arg ns "$ns" --arg at "127.0.0.1:$port" '[
  {labels: {instance: $at, job: "cifar-operator", namespace: $ns, pod: "cifar-operator-x"}, health: "up"},
  {labels: {instance: $at, job: "cifartrain-pods", namespace: $ns, pod: "a-worker-1",
            cifartrain_job: "a", replica_type: "worker", replica_index: "1"}, health: "up"}]
  | sort_by(.labels.pod, .labels.instance)')
[ "$got" = "$expected" ] || fail "targets: got
$got
expected
$expected"
query() { curl -fsG "$api/query" --data-urlencode "query=$1" | jq -c '.data.result[]'; }
ns_sel="namespace=\"$ns\""
# The target's labels are on every series scraped from it, not only on `up`.
scraped=$(query "count(prometheus_build_info{job=\"cifartrain-pods\",cifartrain_job=\"a\",replica_type=\"worker\",replica_index=\"1\",pod=\"a-worker-1\",$ns_sel})")
[ -n "$scraped" ] || fail "no scraped series carries the training pod's labels"

# The rules loaded, every one of them evaluating without error (once each has been evaluated).
for _ in $(seq 30); do
  rules=$(curl -fs "$api/rules")
  jq -e 'all(.data.groups[].rules[]; .health != "unknown")' <<<"$rules" >/dev/null && break
  sleep 1
done
alerts=$(jq '[.data.groups[].rules[] | select(.type == "alerting")] | length' <<<"$rules")
bad=$(jq -c '[.data.groups[].rules[] | select(.health != "ok") | .name]' <<<"$rules")
[ "$alerts" -eq "$(grep -c '^ *- alert:' "$repo/deploy/prometheus/rules/cifartrain-alerts.yaml")" ] ||
  fail "$alerts alerting rules loaded"
[ "$bad" = "[]" ] || fail "rules failing: $bad"
echo "discovery.sh: targets and labels as expected; $alerts alerting rules loaded"
