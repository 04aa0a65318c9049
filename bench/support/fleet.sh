# shellcheck shell=bash
# Sourced by the simulated fleet's benchmarks (operator_fleet.sh, fleet_storm.sh), with $audit
# set to the API server's audit log (deploy/sim-cluster).

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
