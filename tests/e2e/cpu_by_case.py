#!/usr/bin/env python3
"""The CPU the end-to-end cases' pods used, by case: what to cut when the suite is too slow.

Samples every pod cgroup of the local cluster's nodes (cpuacct, the kubelets' cgroup roots) and
the API server's pods, and charges each pod's CPU to the test its namespace was made for (the
namespace's annotation cifartrain.io/test, tests/integration/test_namespace.h). Runs until
interrupted (or SIGTERM), then prints core-seconds by case, the heaviest first.

    tests/e2e/cpu_by_case.py build/e2e/cluster/kubeconfig [--interval 2] > cpu-by-case.txt &
    ... ctest -L e2e ...; kill %1
"""
import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import time

CPUACCT = "/sys/fs/cgroup/cpuacct"


def pod_usage():
    """uid -> CPU nanoseconds, for every pod cgroup on this machine."""
    usage = {}
    for root, dirs, _ in os.walk(CPUACCT):
        for d in list(dirs):
            if d.startswith("pod"):
                try:
                    with open(os.path.join(root, d, "cpuacct.usage")) as f:
                        usage[d[3:].replace("_", "-")] = int(f.read())
                except OSError:
                    pass
                dirs.remove(d)  # a pod's containers are inside it
    return usage


def owners(kubeconfig):
    """uid -> the test its pod's namespace was made for ('' for the cluster's own)."""
    def get(kind):
        out = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "get", kind, "-A", "-o",
                              "json", "--request-timeout=5s"],
                             capture_output=True, text=True, check=False).stdout
        return json.loads(out)["items"] if out else []
    tests = {ns["metadata"]["name"]:
             ns["metadata"].get("annotations", {}).get("cifartrain.io/test", "")
             for ns in get("namespaces")}
    return {p["metadata"]["uid"]: tests.get(p["metadata"]["namespace"], "") or
            "(namespace " + p["metadata"]["namespace"] + ")" for p in get("pods")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kubeconfig")
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    last, owner = {}, {}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        while not stop:
            usage = pod_usage()
            last.update(usage)  # what a pod used since it started, until it was last seen
            if any(uid not in owner for uid in usage):
                owner.update(owners(args.kubeconfig))
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    by_case = collections.Counter()
    for uid, used in last.items():
        by_case[owner.get(uid, "(unknown pod)")] += used / 1e9
    total = sum(by_case.values())
    print(f"{total:8.0f} core-s in {len(last)} pods")
    for case, seconds in by_case.most_common():
        print(f"{seconds:8.1f} {case}")


if __name__ == "__main__":
    sys.exit(main())
