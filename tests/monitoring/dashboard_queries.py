"""Evaluates every query of the Grafana dashboard against a real Prometheus, the dashboard's
variables substituted as Grafana would ($namespace, $job, $__rate_interval), and fails if one
has no result: what a user would see as "No data". The variable queries are checked too (the
namespace and the job must be among their values). Standard library only.

Prints one line per query: its panel, refId, the number of series and their values (NaN is a
result: 0/0, e.g. a quantile of a histogram that saw nothing in the window).
    dashboard_queries.py --prometheus http://127.0.0.1:9090 --namespace NS --job NAME
        [--rate-interval 1m] [--at UNIX_TIME] [--dashboard deploy/grafana/cifartrain.json]
        [--training-only]
--at evaluates at that instant (default now): a finished job's pods are gone and their series
stale at once, so a test notes a moment while the job runs and may evaluate it later.
--training-only leaves out the operator's series (a Prometheus that does not scrape it).
Exits 1 if a query has no result or Prometheus refuses it.
"""

import argparse
import json
import math
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What tells a query's series apart on a dashboard (the rest repeats the selector).
SHOWN_LABELS = {"pod", "replica_type", "replica_index", "phase", "result", "state", "le"}


def substitute(text: str, values: dict[str, str]) -> str:
    def value(m: re.Match) -> str:
        if m.group(1) not in values:
            raise SystemExit(f"dashboard_queries: no value for ${m.group(1)} in {text}")
        return values[m.group(1)]

    return re.sub(r"\$\{?(\w+)\}?", value, text)


def get(base: str, path: str, params: list[tuple[str, str]]) -> dict:
    url = f"{base.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:  # a bad query: Prometheus says why in the body
        return json.load(e)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prometheus", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--rate-interval", default="1m",
                        help="$__rate_interval: Grafana makes it at least 4 scrape intervals")
    parser.add_argument("--at", help="evaluate at this instant (Unix time; default: now)")
    parser.add_argument("--dashboard", type=Path, default=ROOT / "deploy/grafana/cifartrain.json")
    parser.add_argument("--training-only", action="store_true")
    args = parser.parse_args()
    values = {"namespace": args.namespace, "job": args.job,
              "__rate_interval": args.rate_interval}
    dashboard = json.loads(args.dashboard.read_text())
    failures = []

    # The variables: label_values(SELECTOR, LABEL) is Prometheus's label values API.
    for variable in dashboard["templating"]["list"]:
        found = re.fullmatch(r"label_values\((.*), (\w+)\)", str(variable.get("query", "")))
        if variable.get("type") != "query" or not found:
            continue
        selector, label = substitute(found.group(1), values), found.group(2)
        window = [("start", str(float(args.at) - 300)), ("end", args.at)] if args.at else []
        got = get(args.prometheus, f"/api/v1/label/{label}/values",
                  [("match[]", selector)] + window)
        options = got.get("data") or []
        want = values[variable["name"]]
        print(f"variable {variable['name']}: {options}")
        if want not in options:
            failures.append(f"variable {variable['name']}: {want} is not among {options} "
                            f"(label_values({selector}, {label}))")

    panels = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    for panel in panels:
        for target in panel.get("targets", []):
            expr = target.get("expr", "")
            where = f'{panel.get("title")} [{target.get("refId")}]'
            if args.training_only and "cifar_operator_" in expr:
                print(f"{where}: left out (operator)")
                continue
            at = [("time", args.at)] if args.at else []
            got = get(args.prometheus, "/api/v1/query",
                      [("query", substitute(expr, values))] + at)
            if got.get("status") != "success":
                failures.append(f"{where}: Prometheus refused it: {got.get('error')}: {expr}")
                continue
            result = got["data"]["result"]
            if got["data"]["resultType"] == "scalar":
                result = [{"metric": {}, "value": result}]
            shown = []
            for item in result:
                v = float(item["value"][1])
                labels = ",".join(f"{k}={lv}" for k, lv in sorted(item["metric"].items())
                                  if k in SHOWN_LABELS)
                number = "NaN" if math.isnan(v) else f"{v:.4g}"
                shown.append(f"{labels}={number}" if labels else number)
            print(f"{where}: {len(result)} series {' '.join(shown)}")
            if not result:
                failures.append(f"{where}: no data: {substitute(expr, values)}")

    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
