#!/usr/bin/env python3
"""The wall time of each test of a ctest run, printed after it: the slowest ones and every
end-to-end case (label e2e), then where each failed test failed (googletest's failure lines and
a few after each: the end of a CI log is often all that is shown of it), then the counts as one
plain line.

Usage (in the build directory, after `ctest --output-junit FILE`): test_times.py FILE [N]
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree


def labels_by_test() -> dict:
    shown = subprocess.run(["ctest", "--show-only=json-v1"], capture_output=True, text=True,
                           check=True)
    labels = {}
    for test in json.loads(shown.stdout)["tests"]:
        for prop in test.get("properties", []):
            if prop["name"] == "LABELS":
                labels[test["name"]] = prop["value"]
    return labels


def failure_excerpt(output: str, after: int = 6, most: int = 40) -> list:
    """googletest's "Failure" lines of `output` with the `after` lines that follow each (the
    expectation and its values), at most `most` lines, each cut to 240 characters."""
    lines = output.splitlines()
    shown = []
    for index, line in enumerate(lines):
        if line.rstrip().endswith(": Failure"):
            shown.extend(lines[index:index + 1 + after])
            shown.append("...")
    return [line[:240] for line in shown[:most]]


def main() -> int:
    try:
        results = ElementTree.parse(sys.argv[1]).getroot()
    except (OSError, ElementTree.ParseError) as error:
        print(f"test_times: no results to show ({error})")
        return 1
    slowest = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    cases = [(case.get("name"), float(case.get("time", 0)), case.get("status", "run"))
             for case in results.iter("testcase")]
    labels = labels_by_test()
    width = max((len(name) for name, _, _ in cases), default=10)

    def row(name, seconds, status):
        mark = "" if status == "run" else f"  ({status})"
        return f"  {seconds:8.1f} s  {name:<{width}}{mark}"

    print(f"\nThe {slowest} slowest tests:")
    for case in sorted(cases, key=lambda c: -c[1])[:slowest]:
        print(row(*case))
    e2e = [case for case in cases if "e2e" in labels.get(case[0], [])]
    print(f"\nEnd-to-end cases (label e2e), {sum(c[1] for c in e2e):.0f} s in all, "
          "some side by side:")
    for case in e2e:
        print(row(*case))
    for case in results.iter("testcase"):
        if case.get("status") != "fail":
            continue
        output = "".join(case.findtext("system-out") or "")
        print(f"\nWhere {case.get('name')} failed:")
        for line in failure_excerpt(output) or ["(no googletest failure line in its output)"]:
            print(f"  {line}")
    passed = sum(1 for _, _, status in cases if status == "run")
    failed = sum(1 for _, _, status in cases if status == "fail")
    skipped = len(cases) - passed - failed
    print(f"\nTotal test time {sum(c[1] for c in cases):.0f} s (wall: ctest's line above)")
    print(f"ctest: {passed} passed, {failed} failed, {skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
