#!/usr/bin/python3
"""CIFAR-10 test accuracy of one recipe run every way cifar-train can run it, each beside the
same recipe in PyTorch (bench/cifar10_torch.py) on the same files, in the same session.

Runs (global batch the same everywhere, so that every run makes the same number of updates per
epoch except the asynchronous PS modes, where every trainer's batch is an update):
  single      cifar-train, one process, 2 intra-op threads, batch B
  torch       PyTorch, one process, 2 threads, batch B
  sync, async, async-reply, hogwild, ssp
              a local PS job (scripts/local-job.sh): one PS, the master and one worker (batch B/2
              each, one thread each: two trainers on two cores) and an evaluator
  allreduce   cifar-train launch -n 2 (c10d Gloo), batch B/2 per rank, one thread per rank
  torch-ddp   PyTorch DDP (Gloo), 2 ranks, batch B/2 per rank, one thread per rank
Each run's test accuracy after every epoch (10,000 test images) and its wall time go to a JSON
line in RESULTS; the tables are printed from that file, so a run can be resumed or extended.

Usage: bench/cifar10_accuracy.py [--build build] [--epochs 4] [--seeds 1,2] [--lr 0.2]
                                 [--train-limit N] [--test-limit N] [--results FILE]
                                 [--table-only] [run ...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PS_MODES = ["sync", "async", "async-reply", "hogwild", "ssp"]
RUNS = ["single", "torch"] + PS_MODES + ["allreduce", "torch-ddp"]
# The PyTorch run each cifar-train run is set beside: the same data-parallel arithmetic (a sync
# PS round and an all-reduce both average two half-batches' gradients, as DDP does).
REFERENCE = {"single": "torch", "allreduce": "torch-ddp", **{m: "torch-ddp" for m in PS_MODES}}


def recipe(args, seed):
    limits = []
    if args.train_limit:
        limits += ["--train-limit", str(args.train_limit)]
    if args.test_limit:
        limits += ["--test-limit", str(args.test_limit)]
    return ["-m", "resnet20", "-nc", "10", "-e", str(args.epochs), "--lr", str(args.lr),
            "--schedule", "onecycle", "--label-smoothing", "0.1", "-s", str(seed)] + limits


def command(run, args, seed, work, data_dir):
    """The command line of one run, and the files its per-epoch test accuracies come from."""
    binary = os.path.join(args.build, "bin", "cifar-train")
    model_dir = os.path.join(work, "model")
    base = recipe(args, seed) + ["-d", "cifar10", "--data-dir", data_dir]
    quiet = ["--metrics-port", "-1", "--progress", "none", "-md", model_dir]
    half = str(args.batch // 2)
    torch_script = [sys.executable, os.path.join(HERE, "cifar10_torch.py")]
    torch_out = os.path.join(work, "torch.jsonl")
    if run == "single":
        return ([binary] + base + ["-b", str(args.batch), "-t", "2"] + quiet,
                os.path.join(model_dir, "monitor.jsonl"))
    if run == "torch":
        return (torch_script + base + ["-b", str(args.batch), "-t", "2", "--out", torch_out],
                torch_out)
    if run in PS_MODES:
        return (["bash", os.path.join(REPO, "scripts", "local-job.sh"), "--bin", binary,
                 "--ps", "1", "--workers", "1", "--port", "7900", "--"] + base +
                ["-b", half, "--ps-mode", run, "--threads", "1", "--workers", "1"] + quiet,
                os.path.join(model_dir, "evaluation.jsonl"))
    if run == "allreduce" or run.startswith("allreduce-"):  # 2 ranks, or "allreduce-N": N
        ranks = int(run.split("-")[1]) if "-" in run else 2
        return ([binary, "launch", "-n", str(ranks), "--master-port", "29950"] + base +
                ["-b", str(args.batch // ranks), "-t", "1", "--workers", "1"] + quiet,
                os.path.join(model_dir, "monitor.jsonl"))
    if run == "torch-ddp":
        return (torch_script + base + ["-b", half, "-t", "1", "--world-size", "2",
                                           "--out", torch_out], torch_out)
    raise ValueError(run)


def per_epoch_accuracy(path):
    """Test accuracy at the end of each epoch: monitor.jsonl's per-epoch lines, or the
    evaluator's evaluation of each epoch's checkpoint."""
    records = [json.loads(line) for line in open(path) if line.strip()]
    by_epoch = {}
    for r in records:
        if r.get("test_accuracy") is not None:
            by_epoch[r["epoch"]] = r["test_accuracy"]  # the last evaluation of each epoch
    return [by_epoch[e] for e in sorted(by_epoch)]


def run_one(run, args, seed, data_dir):
    with tempfile.TemporaryDirectory() as work:
        argv, accuracy_file = command(run, args, seed, work, data_dir)
        shown = (" ".join(argv).replace(work, "<tmp>").replace(data_dir, "<cifar10>")
                 .replace(REPO + os.sep, ""))
        print(f"+ {shown}", file=sys.stderr, flush=True)
        start = time.monotonic()
        with open(os.path.join(work, "log"), "w") as log:
            code = subprocess.call(argv, stdout=log, stderr=subprocess.STDOUT)
        seconds = time.monotonic() - start
        accuracies = per_epoch_accuracy(accuracy_file) if os.path.exists(accuracy_file) else []
        failure = None
        if code != 0 or len(accuracies) < args.epochs:
            lines = open(os.path.join(work, "log")).read().splitlines()
            errors = [l for l in lines if "error" in l.lower()] or lines[-3:]
            failure = f"exit {code}: {errors[0].strip() if errors else 'no output'}"
            print(f"  failed: {failure}", file=sys.stderr)
        return {"run": run, "seed": seed, "epochs": args.epochs, "lr": args.lr,
                "batch": args.batch, "train_limit": args.train_limit,
                "test_limit": args.test_limit, "accuracy": accuracies, "seconds": round(seconds, 1),
                "failure": failure, "command": shown}


def pct(x):
    return f"{100 * x:.2f}%"


def same_recipe(result, args):
    return (result["epochs"] == args.epochs and result["lr"] == args.lr and
            result["batch"] == args.batch and result.get("train_limit", 0) == args.train_limit and
            result.get("test_limit", 0) == args.test_limit)


def print_tables(results, args):
    rows = {}
    for r in results:
        if same_recipe(r, args):
            rows.setdefault(r["run"], []).append(r)

    def final(run):
        done = [r for r in rows.get(run, []) if not r["failure"]]
        return [r["accuracy"][-1] for r in done]

    def mean_text(values):
        if not values:
            return "-"
        text = pct(statistics.mean(values))
        return text + (f" ({', '.join(pct(v) for v in values)})" if len(values) > 1 else "")

    single = final("single")
    train = f"the first {args.train_limit:,}" if args.train_limit else "all 50,000"
    test = f"the first {args.test_limit:,}" if args.test_limit else "the 10,000"
    print(f"ResNet-20 trained on {train} training images, {args.epochs} epochs, global batch "
          f"{args.batch}, one-cycle peak lr {args.lr}, label smoothing 0.1, SGD Nesterov 0.9, "
          f"weight decay 5e-4, crop+flip; test accuracy on {test} test images (mean over "
          "seeds, each seed in brackets).\n")
    print("| run | cifar-train | PyTorch, same recipe | cifar-train - PyTorch | cost vs single "
          "process | cifar-train wall s | PyTorch wall s |")
    print("|---|---|---|---:|---:|---:|---:|")
    for run in RUNS:
        if run not in rows or run.startswith("torch"):
            continue
        ours, ref = final(run), final(REFERENCE[run])
        failed = [r for r in rows[run] if r["failure"]]
        text = mean_text(ours) + (f"; {len(failed)} failed: {failed[0]['failure']}"
                                  if failed else "")
        diff = (f"{100 * (statistics.mean(ours) - statistics.mean(ref)):+.2f}"
                if ours and ref else "-")
        cost = (f"{100 * (statistics.mean(ours) - statistics.mean(single)):+.2f}"
                if ours and single else "-")
        wall = lambda name: (f"{statistics.mean(r['seconds'] for r in rows[name]):.0f}"
                             if rows.get(name) else "-")
        print(f"| {run} | {text} | {REFERENCE[run]}: {mean_text(ref)} | {diff} | {cost} | "
              f"{wall(run)} | {wall(REFERENCE[run])} |")

    print("\nEpochs to accuracy: test accuracy after each epoch (mean over seeds), and wall time.\n")
    header = " | ".join(f"epoch {e}" for e in range(1, args.epochs + 1))
    print(f"| run | {header} | wall s | s per epoch |")
    print("|---|" + "---:|" * (args.epochs + 2))
    for run in RUNS:
        done = [r for r in rows.get(run, []) if not r["failure"]]
        if not done:
            continue
        curve = [statistics.mean(r["accuracy"][e] for r in done) for e in range(args.epochs)]
        seconds = statistics.mean(r["seconds"] for r in done)
        print(f"| {run} | {' | '.join(pct(a) for a in curve)} | {seconds:.0f} | "
              f"{seconds / args.epochs:.0f} |")
    print("\nCommands (seed, wall s):")
    for r in results:
        if same_recipe(r, args):
            print(f"- `{r['command']}` (seed {r['seed']}, {r['seconds']:.0f} s)")


def run_and_tabulate(args, runs, run, tabulate):
    """Unless --table-only: each of `runs` for each seed (`run(name, args, seed, data_dir)`), each
    result appended to args.results as it ends; then the tables of all that file holds."""
    if not args.table_only:
        data_dir = subprocess.check_output(
            ["bash", os.path.join(REPO, "scripts", "cifar10-data.sh")], text=True).strip()
        for seed in (int(s) for s in args.seeds.split(",")):
            for name in runs:
                result = run(name, args, seed, data_dir)
                with open(args.results, "a") as out:
                    out.write(json.dumps(result) + "\n")
    results = [json.loads(l) for l in open(args.results)] if os.path.exists(args.results) else []
    tabulate(results, args)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", default=RUNS, help=f"of {RUNS}")
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--batch", type=int, default=128, help="global batch")
    parser.add_argument("--train-limit", type=int, default=0,
                        help="train on the first N images (0: all 50,000)")
    parser.add_argument("--test-limit", type=int, default=0,
                        help="evaluate on the first N test images (0: all 10,000)")
    parser.add_argument("--results", default="cifar10-accuracy.jsonl")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    unknown = set(args.runs) - set(RUNS)
    if unknown:
        parser.error(f"unknown runs {sorted(unknown)}: choose from {RUNS}")
    run_and_tabulate(args, args.runs, run_one, print_tables)


if __name__ == "__main__":
    main()
