"""Checks the Grafana dashboard deploy/grafana/cifartrain.json (run by grafana-dashboard.sh with
the SDK's venv python):
  - drift: the committed JSON is exactly what deploy/grafana/dashboard.py generates;
  - schema: Grafana's SDK reads it back into its dashboard model and writes the same JSON
    (a field its schema does not know, or a wrongly typed one, would not survive);
  - structure: uid and title; the variables datasource, namespace and job; every panel reads
    ${datasource}, has queries, each with an expr and a refId; unique panel ids; the rows the
    issue asks for;
  - queries: only the variables $namespace, $job and $__rate_interval; every cifar_ series exists
    in the sources (contract/metrics.h with runtime/metrics/runtime_metrics.cpp, and
    operator/cifartrainjob/operator_metrics.cpp) with its type: _bucket/_sum/_count only on
    histograms, rate() only on counters and histogram parts, deriv() only on gauges; training
    series filtered to one job by namespace and cifartrain_job, the operator's per-job series by
    job_namespace and job_name;
  - with --promtool PATH: every query, its variables substituted, parses as PromQL (promtool
    check rules on a rule file of them).
Exits 1 with every failure listed.
    check_dashboard.py REPO_ROOT [--promtool PATH]
"""

import argparse
import difflib
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard

DASHBOARD = Path("deploy/grafana/cifartrain.json")
GENERATOR = Path("deploy/grafana/dashboard.py")
REGENERATE = f'"$(deploy/grafana/setup-sdk.sh)" {GENERATOR} --out {DASHBOARD}'

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
EXPR_VARIABLES = {"namespace", "job", "__rate_interval"}
ROWS = ["Progress", "Loss and accuracy", "Throughput", "Communication", "Checkpoints",
        "Pods and restarts", "Stalls", "Operator"]
# What each variable stands for when the queries go to promtool.
SUBSTITUTE = {"namespace": "default", "job": "example", "__rate_interval": "1m"}
TRAINING_FILTER = {"namespace": "$namespace", "cifartrain_job": "$job"}
OPERATOR_JOB_FILTER = {"job_namespace": "$namespace", "job_name": "$job"}


class Failures(list):
    def __call__(self, message: str) -> None:
        self.append(message)


def metric_types(root: Path) -> dict[str, str]:
    """Series name -> counter|gauge|histogram, read from the sources that register them."""
    types: dict[str, str] = {}
    contract = (root / "contract/metrics.h").read_text()
    names = dict(re.findall(r'inline constexpr char (k\w+)\[\] = "(cifar_\w+)"', contract))
    runtime = (root / "runtime/metrics/runtime_metrics.cpp").read_text()
    for kind, constant in re.findall(r"\b(counter|gauge|histogram)\(\s*metric::(k\w+)", runtime):
        types[names[constant]] = kind
    operator = (root / "operator/cifartrainjob/operator_metrics.cpp").read_text()
    for kind, name in re.findall(r'Build(Counter|Gauge|Histogram)\(\)\s*\.Name\("(cifar_\w+)"\)',
                                 operator):
        types[name] = kind.lower()
    return types


def series_type(name: str, types: dict[str, str]) -> tuple[str | None, str]:
    """(type of the metric, "" or the histogram part) of a series name; None if unknown."""
    if name in types:
        return types[name], ""
    for part in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(part)
        if base != name and types.get(base) == "histogram":
            return "histogram", part
    return None, ""


def matchers(selector: str) -> dict[str, str]:
    """label -> value of the equality matchers of a {...} selector (other operators: '~'...)."""
    found = {}
    for label, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', selector):
        found[label] = value if op == "=" else op + value
    return found


def check_expr(where: str, expr: str, types: dict[str, str], fail: Failures) -> None:
    for var in re.findall(r"\$\{?(\w+)", expr):
        if var not in EXPR_VARIABLES:
            fail(f"{where}: variable ${var} is not one of {sorted(EXPR_VARIABLES)}: {expr}")
    for name, selector in re.findall(r"\b(cifar_\w+)\s*(\{[^}]*\})?", expr):
        kind, part = series_type(name, types)
        if kind is None:
            fail(f"{where}: {name} is registered nowhere in the sources "
                 f"(contract/metrics.h, operator_metrics.cpp): {expr}")
            continue
        if kind == "histogram" and not part:
            fail(f"{where}: {name} is a histogram: query its _bucket, _sum or _count")
        labels = matchers(selector)
        if name.startswith("cifar_operator_job_"):
            want = OPERATOR_JOB_FILTER
        elif name.startswith("cifar_operator_"):
            want = {}  # the operator's own series carry no job
        else:
            want = TRAINING_FILTER
        for label, value in want.items():
            if labels.get(label) != value:
                fail(f'{where}: {name} not filtered by {label}="{value}": {expr}')
    for function, name in re.findall(r"\b(rate|irate|increase|deriv)\(\s*(cifar_\w+)", expr):
        kind, part = series_type(name, types)
        if kind is None:
            continue
        counter_like = kind == "counter" or part in ("_bucket", "_sum", "_count")
        if function == "deriv" and kind != "gauge":
            fail(f"{where}: deriv() of {name}, a {kind} (rate() is for counters)")
        if function != "deriv" and not counter_like:
            fail(f"{where}: {function}() of {name}, a {kind}: only counters and histogram "
                 "parts count up (deriv() for gauges)")


def panels_of(dashboard: dict) -> list[dict]:
    """Every panel, those inside collapsed rows too."""
    out = []
    for panel in dashboard.get("panels", []):
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def check_structure(dashboard: dict, types: dict[str, str], fail: Failures) -> list[str]:
    """Returns every query's expr (variable queries included), for promtool."""
    for key in ("uid", "title"):
        if not dashboard.get(key):
            fail(f"dashboard has no {key}")
    exprs = []
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    if set(variables) != {"datasource", "namespace", "job"}:
        fail(f"variables are {sorted(variables)}, not datasource, namespace, job")
    if "datasource" in variables and (variables["datasource"].get("type") != "datasource" or
                                      variables["datasource"].get("query") != "prometheus"):
        fail("variable datasource is not a Prometheus datasource variable")
    for name in ("namespace", "job"):
        variable = variables.get(name)
        if variable is None:
            continue
        if variable.get("type") != "query" or variable.get("datasource") != DATASOURCE:
            fail(f"variable {name} is not a query on ${{datasource}}")
        query = variable.get("query", "")
        found = re.fullmatch(r"label_values\((.*), (\w+)\)", query)
        if not found:
            fail(f"variable {name}: not a label_values() query: {query}")
            continue
        metric = re.match(r"\w+", found.group(1)).group(0)
        if series_type(metric, types)[0] is None:
            fail(f"variable {name}: {metric} is registered nowhere in the sources: {query}")
        for var in re.findall(r"\$\{?(\w+)", query):
            if var != "namespace":
                fail(f"variable {name}: ${var} in its query (only $namespace is set before it)")
        exprs.append(found.group(1))

    ids = [p.get("id") for p in panels_of(dashboard)]
    if None in ids or len(set(ids)) != len(ids):
        fail(f"panel ids missing or repeated: {ids}")
    rows = [p.get("title") for p in panels_of(dashboard) if p.get("type") == "row"]
    if rows != ROWS:
        fail(f"rows are {rows}, not {ROWS}")
    for panel in panels_of(dashboard):
        if panel.get("type") == "row":
            continue
        where = f'panel "{panel.get("title") or panel.get("id")}"'
        if not panel.get("title"):
            fail(f"{where} has no title")
        if panel.get("datasource") != DATASOURCE:
            fail(f"{where}: datasource is {panel.get('datasource')}, not {DATASOURCE}")
        pos = panel.get("gridPos", {})
        if not (pos.get("w", 0) > 0 and pos.get("h", 0) > 0 and pos.get("x", 0) + pos["w"] <= 24):
            fail(f"{where}: gridPos {pos} does not fit the 24-column grid")
        targets = panel.get("targets") or []
        if not targets:
            fail(f"{where} has no queries")
        refs = [t.get("refId") for t in targets]
        if not all(refs) or len(set(refs)) != len(refs):
            fail(f"{where}: refIds missing or repeated: {refs}")
        for target in targets:
            expr = target.get("expr", "")
            if not expr.strip():
                fail(f"{where}: query {target.get('refId')} has no expr")
                continue
            if target.get("datasource") not in (None, DATASOURCE):
                fail(f"{where}: query {target.get('refId')} reads {target.get('datasource')}")
            check_expr(where, expr, types, fail)
            exprs.append(expr)
    return exprs


def check_promql(promtool: str, exprs: list[str], fail: Failures) -> None:
    def substitute(expr: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: SUBSTITUTE.get(m.group(1), m.group(0)), expr)

    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": substitute(e)} for i, e in enumerate(exprs)]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:  # JSON is YAML to promtool
        json.dump(rules, f)
        f.flush()
        run = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"promtool does not parse the queries:\n{run.stdout}{run.stderr}")
    else:
        print(f"promtool parses all {len(exprs)} queries")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--promtool")
    args = parser.parse_args()
    root = args.root.resolve()
    fail = Failures()

    committed = (root / DASHBOARD).read_text()
    spec = importlib.util.spec_from_file_location("dashboard", root / GENERATOR)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    generated = generator.render()
    if generated != committed:
        diff = "".join(list(difflib.unified_diff(
            committed.splitlines(True), generated.splitlines(True),
            f"{DASHBOARD} (committed)", f"{GENERATOR} (generated)"))[:60])
        fail(f"{DASHBOARD} is not what {GENERATOR} generates; regenerate it:\n"
             f"  {REGENERATE}\n{diff}")

    dashboard = json.loads(committed)
    register_default_plugins()
    again = json.loads(JSONEncoder().encode(Dashboard.from_json(dashboard)))
    if again != dashboard:
        diff = "".join(list(difflib.unified_diff(
            json.dumps(dashboard, indent=1, sort_keys=True).splitlines(True),
            json.dumps(again, indent=1, sort_keys=True).splitlines(True),
            "committed", "read back by the SDK"))[:60])
        fail(f"Grafana's SDK does not read {DASHBOARD} back unchanged (its schema lacks "
             f"something there):\n{diff}")

    types = metric_types(root)
    exprs = check_structure(dashboard, types, fail)
    if args.promtool:
        check_promql(args.promtool, exprs, fail)

    panels = [p for p in panels_of(dashboard) if p.get("type") != "row"]
    if fail:
        print(f"{len(fail)} problem(s) in {DASHBOARD}:", file=sys.stderr)
        for message in fail:
            print(f"- {message}", file=sys.stderr)
        return 1
    print(f"{DASHBOARD}: {len(panels)} panels, {len(exprs)} queries: generated, read back by "
          "the SDK, every query on known series and variables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
