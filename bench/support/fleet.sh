# shellcheck shell=bash
# Sourced by the simulated fleet's benchmarks (operator_fleet.sh, fleet_storm.sh, fleet_kueue.sh,
# fleet_topology.sh); audit_requests needs $audit set to the API server's audit log
# (deploy/sim-cluster).

# cpu_seconds PID: the process's user + system CPU seconds so far.
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' /proc/"$1"/stat; }

# audit_requests OFFSET AGENT: the audit log's requests after line OFFSET from user agents
# starting AGENT, by verb on stdout ("create=9000 patch=12 ..."; watches opened count as watch),
# by verb and resource on stderr.
audit_requests() {
  tail -n +"$(($1 + 1))" "$audit" | python3 -c '
import collections, json, sys
agent, verbs, resources = sys.argv[1], collections.Counter(), collections.Counter()
for line in sys.stdin:
    event = json.loads(line)
    if event.get("userAgent", "").startswith(agent):
        verbs[event["verb"]] += 1
        resources[event["verb"] + " " + event.get("objectRef", {}).get("resource", "-")] += 1
print("  " + agent + ": " + ", ".join(f"{what} {n}" for what, n in sorted(resources.items())), file=sys.stderr)
print(" ".join(f"{verb}={n}" for verb, n in sorted(verbs.items())) or "none=0")' "$2"
}

# kueue_queue NAME LOCAL_QUEUE NAMESPACE GPUS [FLAVOR_SPEC]: a Kueue queue over the fleet, for
# `kubectl apply -f -`: a ResourceFlavor and a ClusterQueue, both NAME (cpu and memory without
# bound, GPUS of nvidia.com/gpu; the flavor's spec FLAVOR_SPEC, a one-line YAML mapping such as
# "{topologyName: racks}"), and LOCAL_QUEUE in NAMESPACE, the only namespace it takes jobs from.
kueue_queue() {
  cat <<YAML
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: $1}
spec: ${5:-{\}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: $1}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $3}}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: $1
      resources:
      - {name: cpu, nominalQuota: 100000}
      - {name: memory, nominalQuota: 1000Ti}
      - {name: nvidia.com/gpu, nominalQuota: $4}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: $2, namespace: $3}
spec: {clusterQueue: $1}
YAML
}

# kueue_queue_ready NAME: waits (60 s at most) until ClusterQueue NAME is active (with the
# caller's `k`, its kubectl).
kueue_queue_ready() {
  k wait --for=jsonpath='{.status.conditions[?(@.type=="Active")].status}'=True \
    "clusterqueue/$1" --timeout=60s >/dev/null
}
