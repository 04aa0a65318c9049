"""The Grafana dashboard of cifartrain's training jobs (deploy/grafana/cifartrain.json), built
with Grafana's own SDK (grafana-foundation-sdk) so that the JSON is the SDK's rendering of
Grafana's dashboard schema, not hand-written.

Regenerate after editing (tests/monitoring checks that the committed JSON is this output), then
write the Helm chart's copy of the JSON (tests/helm checks it):
    "$(deploy/grafana/setup-sdk.sh)" deploy/grafana/dashboard.py --out deploy/grafana/cifartrain.json
    make chart-files

Series names and types: contract/metrics.h and runtime/metrics/runtime_metrics.cpp (the
training pods), operator/cifartrainjob/operator_metrics.cpp (the operator). Labels the Prometheus
scrape config puts on every training-pod series: namespace, pod, cifartrain_job, replica_type,
replica_index. Every pod registers every runtime series (a PS pod's cifar_loss is 0, a worker's
cifar_ps_staleness is an empty histogram), so the queries pick the trainers where the others
would only add zeros, and aggregate with max where one pod speaks for the job.

The queries use only $namespace, $job and $__rate_interval: the e2e test substitutes those and
evaluates every panel's query against a real Prometheus scraping real jobs (it fails on an empty
result), so a query here must have a result on any healthy job, PS or all-reduce.
"""

import argparse
import sys

from grafana_foundation_sdk.builders import common as common_builder
from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    Threshold,
    ThresholdsMode,
    VariableRefresh,
    VariableSort,
)

UID = "cifartrain-jobs"
TITLE = "cifartrain / training job"

# Every panel and query reads the Prometheus the user picks in the datasource variable.
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")

# One training job's series (labels from the scrape config), and the trainers among its pods
# (the chief, "master", and the workers: the ones that take steps).
JOB = 'namespace="$namespace", cifartrain_job="$job"'
TRAINERS = JOB + ', replica_type=~"master|worker"'
# The operator's series about one job.
OP_JOB = 'job_namespace="$namespace", job_name="$job"'

RATE = "[$__rate_interval]"
QUANTILES = (0.5, 0.9, 0.99)


def query(expr: str, legend: str = "") -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).datasource(DATASOURCE)
    return q.legend_format(legend) if legend else q


def quantile_queries(histogram: str, selector: str, what: str = "") -> list[prometheus.Dataquery]:
    """p50/p90/p99 of a histogram over the rate interval, all the selected pods together."""
    prefix = f"{what} " if what else ""
    matchers = f"{{{selector}}}" if selector else ""
    return [
        query(
            f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{matchers}{RATE})))",
            f"{prefix}p{round(q * 100)}",
        )
        for q in QUANTILES
    ]


def lettered(targets: list[prometheus.Dataquery]) -> list[prometheus.Dataquery]:
    """refIds A, B, ... (Grafana names a panel's queries so)."""
    return [t.ref_id(chr(ord("A") + i)) for i, t in enumerate(targets)]


def series(title: str, description: str, targets: list[prometheus.Dataquery], unit: str,
           width: int = 12, lo: float | None = 0, hi: float | None = None) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .height(8)
        .span(width)
        .line_width(1)
        .fill_opacity(10)
        .show_points(common.VisibilityMode.NEVER)
        .legend(
            common_builder.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(common_builder.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI))
        .targets(lettered(targets))
    )
    if lo is not None:
        panel = panel.min(lo)
    if hi is not None:
        panel = panel.max(hi)
    return panel


def single(title: str, description: str, target: prometheus.Dataquery, unit: str,
           thresholds: list[Threshold] | None = None, width: int = 6,
           lo: float | None = None, hi: float | None = None) -> stat.Panel:
    panel = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .height(5)
        .span(width)
        .graph_mode(common.BigValueGraphMode.AREA)
        .reduce_options(common_builder.ReduceDataOptions().calcs(["lastNotNull"]))
        .targets(lettered([target]))
    )
    if thresholds:
        panel = panel.thresholds(
            dashboard.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(thresholds)
        )
    if lo is not None:
        panel = panel.min(lo)
    if hi is not None:
        panel = panel.max(hi)
    return panel


def variables() -> list:
    return [
        dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        dashboard.QueryVariable("namespace")
        .label("Namespace")
        .datasource(DATASOURCE)
        .query("label_values(cifar_steps_total, namespace)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC),
        dashboard.QueryVariable("job")
        .label("CifarTrainJob")
        .datasource(DATASOURCE)
        .query('label_values(cifar_steps_total{namespace="$namespace"}, cifartrain_job)')
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC),
    ]


def progress_row() -> tuple[str, list]:
    # The job's step and total come from cifar_job_step / cifar_job_total_steps, which the
    # trainers set (a PS job's step is the PS version, every trainer's updates); the other pods
    # hold 0, so max is the job's position. The operator's status.progress reads the same series.
    step = f"max(cifar_job_step{{{JOB}}})"
    total = f"max(cifar_job_total_steps{{{JOB}}})"
    return "Progress", [
        single("Epoch", "The chief's current epoch (1-based).",
               query(f"max(cifar_epoch{{{JOB}}})", "epoch"), "none"),
        single("Done", "Steps done out of the job's total (status.progress.progressPercentage).",
               query(f"100 * {step} / {total}", "done"), "percent", lo=0, hi=100),
        # Remaining steps at the recent rate, as the operator's
        # status.progress.estimatedRemainingSeconds (operator/cifartrainjob/progress.cpp; it also
        # smooths the estimate). cifar_job_step is a gauge: deriv, not rate.
        single("ETA", "Time to the last step at the rate of the last few scrapes "
               "(status.progress.estimatedRemainingSeconds computes it the same way).",
               query(f"({total} - {step}) / max(deriv(cifar_job_step{{{JOB}}}{RATE}))", "eta"),
               "s"),
        single("Steps per second", "The job's updates per second (all trainers of a PS job).",
               query(f"max(deriv(cifar_job_step{{{JOB}}}{RATE}))", "steps/s"), "none", lo=0),
        series("Job step", "The job's step against its total.",
               [query(step, "step"), query(total, "total")], "none", width=24),
    ]


def loss_row() -> tuple[str, list]:
    return "Loss and accuracy", [
        series("Training loss", "Loss of each trainer's latest step.",
               [query(f"cifar_loss{{{TRAINERS}}}", "{{replica_type}}-{{replica_index}}")],
               "none"),
        # Test accuracy: the evaluator's if the job has one, else the chief's evaluations; 0 until
        # the first (so it has a value on any job, as status.progress.testAccuracy has not).
        series("Accuracy", "Training accuracy of the current epoch so far, per trainer; "
               "test-set accuracy of the latest evaluation.",
               [query(f"cifar_train_accuracy{{{TRAINERS}}}",
                      "train {{replica_type}}-{{replica_index}}"),
                query(f"max(cifar_test_accuracy{{{JOB}}})", "test")],
               "percentunit", hi=1),
    ]


def throughput_row() -> tuple[str, list]:
    return "Throughput", [
        series("Images per second", "Training images per second, by replica type and in all.",
               [query(f"sum by (replica_type) (rate(cifar_images_total{{{TRAINERS}}}{RATE}))",
                      "{{replica_type}}"),
                query(f"sum(rate(cifar_images_total{{{TRAINERS}}}{RATE}))", "job")],
               "none", width=8),
        series("Step time", "Wall time of one training step, all trainers together.",
               quantile_queries("cifar_step_seconds", TRAINERS), "s", width=8),
        # The step's time includes the wait for the data loader (runtime/train/loop.cpp), so the
        # share is wait / step time.
        series("Data-wait share", "Share of the step time spent waiting for the data loader.",
               [query(f"sum by (replica_type) (rate(cifar_data_wait_seconds_total{{{TRAINERS}}}"
                      f"{RATE})) / sum by (replica_type) (rate(cifar_step_seconds_sum"
                      f"{{{TRAINERS}}}{RATE}))", "{{replica_type}}")],
               "percentunit", width=8, hi=1),
    ]


def communication_row() -> tuple[str, list]:
    # Every pod has every series: on an all-reduce job the PS histograms are empty (their
    # quantiles NaN, their rates 0) and the other way round; that is the honest answer there.
    return "Communication", [
        series("PS push/pull latency", "Trainers: one push of gradients and pull of parameters "
               "to and from all PS shards.",
               quantile_queries("cifar_ps_push_pull_seconds", TRAINERS), "s", width=8),
        series("PS traffic", "Gradient bytes the trainers push and parameter bytes they pull.",
               [query(f"sum(rate(cifar_ps_push_bytes_total{{{JOB}}}{RATE}))", "push"),
                query(f"sum(rate(cifar_ps_pull_bytes_total{{{JOB}}}{RATE}))", "pull")],
               "Bps", width=8),
        series("PS staleness", "Updates applied between the parameters a gradient was computed "
               "on and its own application (the PS shards).",
               quantile_queries("cifar_ps_staleness", JOB)
               + [query(f"sum(rate(cifar_ps_staleness_sum{{{JOB}}}{RATE})) / "
                        f"sum(rate(cifar_ps_staleness_count{{{JOB}}}{RATE}))", "mean")],
               "none", width=8),
        series("PS retries and evictions", "Trainers' calls to a PS shard retried; trainers "
               "a shard dropped from a round after --ps-timeout of silence.",
               [query(f"sum(rate(cifar_ps_retries_total{{{JOB}}}{RATE}))", "retries"),
                query(f"sum(rate(cifar_ps_evictions_total{{{JOB}}}{RATE}))", "evictions")],
               "ops", width=6),
        series("All-reduce time", "One step's gradient all-reduce, first bucket started to last "
               "done; and the time the step waited for it after backward.",
               quantile_queries("cifar_allreduce_seconds", TRAINERS)
               + quantile_queries("cifar_allreduce_wait_seconds", TRAINERS, "wait")[1:2],
               "s", width=6),
        series("All-reduce traffic", "Gradient bytes each rank reduces.",
               [query(f"sum by (replica_type, replica_index) (rate(cifar_allreduce_bytes_total"
                      f"{{{TRAINERS}}}{RATE}))", "{{replica_type}}-{{replica_index}}")],
               "Bps", width=6),
        series("All-reduce overlap", "Share of the latest step's all-reduce hidden behind "
               "backward (1 - wait / all-reduce time), per rank.",
               [query(f"cifar_allreduce_overlap_ratio{{{TRAINERS}}}",
                      "{{replica_type}}-{{replica_index}}")],
               "percentunit", width=6, hi=1),
    ]


def checkpoints_row() -> tuple[str, list]:
    # Checkpoints come once an epoch or every --checkpoint-every steps: a rate window mostly
    # holds none, so the durations are over the pods' lifetimes (the histograms as they stand).
    return "Checkpoints", [
        single("Checkpoints written", "Checkpoints the job's pods have written.",
               query(f"sum(cifar_checkpoints_total{{{JOB}}})", "checkpoints"), "none"),
        series("Checkpoint duration", "Time to write one checkpoint, since the pods started.",
               [query(f"sum(cifar_checkpoint_seconds_sum{{{JOB}}}) / "
                      f"sum(cifar_checkpoint_seconds_count{{{JOB}}})", "mean"),
                query(f"histogram_quantile(0.9, sum by (le) (cifar_checkpoint_seconds_bucket"
                      f"{{{JOB}}}))", "p90")],
               "s", width=18),
    ]


def pods_row() -> tuple[str, list]:
    # The operator's gauges about the job. max, not sum: with leader election a standby replica
    # may still serve what it last saw.
    return "Pods and restarts", [
        series("Pods by phase", "The job's pods by replica type and phase, as the operator "
               "sees them.",
               [query(f"max by (replica_type, phase) (cifar_operator_job_pods{{{OP_JOB}}})",
                      "{{replica_type}} {{phase}}")],
               "none", width=18),
        # `or vector(0)`: before the operator first reconciles the job (or with an operator that
        # predates the gauge) there is no series, and no restarts is then the true answer.
        single("Restarts", "Restarts counted against the job's backoffLimit (status.restarts "
               "and the pods' in-place restarts).",
               query(f"max(cifar_operator_job_restarts{{{OP_JOB}}}) or vector(0)", "restarts"),
               "none", thresholds=[Threshold(None, "green"), Threshold(1, "orange")]),
    ]


def stalls_row() -> tuple[str, list]:
    # Every role's heartbeat (0 while it waits by design); a trainer's watchdog reports a stall
    # past its limit (cifar_stall_reported, the report's summary in its `report` label), and the
    # operator's condition Stalled and runPolicy.onStall act on it.
    return "Stalls", [
        series("Seconds since progress", "Per pod: seconds since its last step (trainers), "
               "update applied (parameter servers) or test batch (evaluator); 0 while it waits by "
               "design. A trainer past its stall limit reports a stall.",
               [query(f"max by (pod) (cifar_seconds_since_progress{{{JOB}}})", "{{pod}}")],
               "s", width=18),
        single("Stalled trainers", "Trainers whose stall report stands (no progress past their "
               "limit); the job's condition Stalled says what the operator did.",
               query(f"count(cifar_stall_reported{{{JOB}}} == 1) or vector(0)", "stalled"),
               "none", thresholds=[Threshold(None, "green"), Threshold(1, "red")]),
    ]


def operator_row() -> tuple[str, list]:
    # The operator's own series carry no job labels; `by (pod)` keeps leader and standby apart
    # where the scrape adds a pod label, and is one series where it does not.
    return "Operator", [
        series("Reconciles by result", "Reconciles per second, by result.",
               [query(f"sum by (result) (rate(cifar_operator_reconciles_total{RATE}))",
                      "{{result}}")],
               "ops", width=8),
        series("Reconcile latency", "Time one reconcile took.",
               quantile_queries("cifar_operator_reconcile_seconds", ""), "s", width=8),
        series("Work queue depth", "Jobs waiting for a reconcile.",
               [query("max by (pod) (cifar_operator_workqueue_depth)", "{{pod}}")],
               "none", width=8),
        series("Jobs by phase", "CifarTrainJobs the operator watches, by state.",
               [query("max by (state) (cifar_operator_jobs)", "{{state}}")], "none", width=18),
        single("Leaders", "Operator replicas that lead (1 when healthy).",
               query("sum(cifar_operator_leader)", "leaders"), "none",
               thresholds=[Threshold(None, "red"), Threshold(1, "green"), Threshold(2, "red")]),
    ]


def build() -> dashboard.Dashboard:
    builder = (
        dashboard.Dashboard(TITLE)
        .uid(UID)
        .description("Progress, loss and accuracy, throughput, communication, checkpoints, "
                     "pods, stalls and the operator of one CifarTrainJob. Generated by "
                     "deploy/grafana/dashboard.py.")
        .tags(["cifartrain", "training"])
        .editable()
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
        .variables(variables())
    )
    # Ids in order: Grafana keys panel links and "view panel" on them.
    next_id = 1
    for row, panels in (progress_row(), loss_row(), throughput_row(), communication_row(),
                        checkpoints_row(), pods_row(), stalls_row(), operator_row()):
        builder = builder.with_row(dashboard.Row(row).id(next_id))
        next_id += 1
        for panel in panels:
            builder = builder.with_panel(panel.id(next_id))
            next_id += 1
    return builder.build()


def render() -> str:
    return JSONEncoder(sort_keys=True, indent=2).encode(build()) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the JSON here (default: standard output)")
    args = parser.parse_args()
    text = render()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
