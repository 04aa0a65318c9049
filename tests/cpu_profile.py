#!/usr/bin/env python3
"""Where a ctest run's CPU goes, by test: what to cut when the suite is too slow.

Samples, until interrupted (Ctrl-C or SIGTERM), then prints core-seconds by test, the heaviest
first, and what the machine did in all:
- each running gtest process (one per ctest case, named by its --gtest_filter): its own CPU and
  that of the children it reaped (cifar-train jobs, kubectl);
- with --pods, the local cluster's pods (cpuacct of the kubelets' pod cgroups), charged to
  the test their namespace was made for (its annotation cifartrain.io/test,
  tests/integration/test_namespace.h).
What neither holds (the control plane, the kubelets, containerd, the kernel) is the rest.

    KUBECONFIG=$PWD/build/e2e/cluster/kubeconfig python3 tests/cpu_profile.py --pods > profile.txt &
    make test; kill %1

(The kubeconfig comes in the environment, not as an argument: E2E.ClusterStop fails when a
process whose command line names the cluster's directory is left on the machine.)
"""
import argparse
import collections
import json
import os
import signal
import subprocess
import time

CPUACCT = "/sys/fs/cgroup/cpuacct"
TICKS = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds():
    """CPU-seconds the machine has spent busy (all cores, since boot)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / TICKS


def test_processes():
    """(pid, test) -> CPU-seconds of each gtest process and its reaped children."""
    usage = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            if not stat[stat.index("(") + 1:stat.rindex(")")].startswith("test_"):
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            flag = b"--gtest_filter="
            test = next((a[len(flag):].decode() for a in args if a.startswith(flag)), None)
            if test:
                fields = stat[stat.rindex(")") + 2:].split()
                usage[(pid, test)] = sum(int(x) for x in fields[11:15]) / TICKS
        except (OSError, ValueError):
            pass  # gone meanwhile
    return usage


def pod_cgroups():
    """pod uid -> CPU-seconds, for every pod cgroup on this machine."""
    usage = {}
    for root, dirs, _ in os.walk(CPUACCT):
        for d in list(dirs):
            if d.startswith("pod"):
                try:
                    with open(os.path.join(root, d, "cpuacct.usage")) as f:
                        usage[d[3:].replace("_", "-")] = int(f.read()) / 1e9
                except OSError:
                    pass
                dirs.remove(d)  # its containers are inside it
    return usage


def pod_tests():
    """pod uid -> the test its namespace was made for (or the namespace)."""
    def items(kind):
        out = subprocess.run(["kubectl", "get", kind, "-A", "-o",
                              "json", "--request-timeout=5s"],
                             capture_output=True, text=True, check=False).stdout
        return json.loads(out)["items"] if out else []
    tests = {ns["metadata"]["name"]:
             ns["metadata"].get("annotations", {}).get("cifartrain.io/test", "")
             for ns in items("namespaces")}
    return {p["metadata"]["uid"]:
            (tests.get(p["metadata"]["namespace"]) or "namespace " + p["metadata"]["namespace"])
            for p in items("pods")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", action="store_true",
                        help="charge the local cluster's pods too (its kubeconfig in $KUBECONFIG)")
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    if args.pods and not os.environ.get("KUBECONFIG"):
        parser.error("--pods reads the cluster's kubeconfig from $KUBECONFIG, which is not set")
    processes, pods, owner = {}, {}, {}
    busy_at_start, started = machine_busy_seconds(), time.time()
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
    try:
        while not stopped:
            processes.update(test_processes())  # the last value each process showed
            if args.pods:
                usage = pod_cgroups()
                pods.update(usage)
                if any(uid not in owner for uid in usage):
                    owner.update(pod_tests())
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    in_processes, in_pods = collections.Counter(), collections.Counter()
    for (_, test), seconds in processes.items():
        in_processes[test] += seconds
    for uid, seconds in pods.items():
        in_pods[owner.get(uid, "a pod no test claimed")] += seconds
    busy = machine_busy_seconds() - busy_at_start
    print(f"{time.time() - started:.0f} s: the machine busy {busy:.0f} CPU-s, test processes "
          f"{sum(in_processes.values()):.0f}, pods {sum(in_pods.values()):.0f}, the rest "
          f"{busy - sum(in_processes.values()) - sum(in_pods.values()):.0f}")
    print(f"{'total':>8} {'process':>8} {'pods':>8}  test")
    both = in_processes + in_pods
    for test, seconds in both.most_common():
        print(f"{seconds:8.1f} {in_processes[test]:8.1f} {in_pods[test]:8.1f}  {test}")


if __name__ == "__main__":
    main()
