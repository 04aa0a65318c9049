#!/usr/bin/python3
"""CIFAR-10 test accuracy of an elastic all-reduce job resized in the middle of every epoch and at
every epoch boundary, beside the same job at a fixed size, in the same session (issue 57).

The recipe is bench/cifar10_accuracy.py's (ResNet-20, one-cycle, label smoothing, crop and flip,
global batch B), on the first 9,984 training images (78 batches of 128: every epoch trains each
once, which the elastic run's sample tally checks). Runs:
  fixed    cifar-train launch -n 2: two ranks of B/2 (that script's "allreduce" run)
  fixed-4  cifar-train launch -n 4: four ranks of B/4
  elastic  a rendezvous store and ranks of slots 0-3 (WORLD_SIZE 4, --min-ranks 2), B/4 a slot:
           the global batch stays B whatever the world (docs/ARCHITECTURE.md, "Elastic jobs"),
           split among the ranks there are. Slots 0 and 1 start; then, by the chief's step,
           slot 2 joins mid-epoch 1, slot 3 near the end of epoch 1, slot 3 leaves (SIGTERM)
           mid-epoch 2, slot 2 near its end, slot 2 joins mid-epoch 3, slot 3 near its end, and
           both leave mid-epoch 4: worlds 2, 3, 4, 3, 2, 3, 4, 2.
Each run's test accuracy after every epoch and its wall time go to a JSON line in RESULTS, with
the elastic run's worlds (the step each round resumed at, and its size) and whether each epoch
trained each sample once (monitor.jsonl's sample tally).

Usage: bench/elastic_accuracy.py [--build build] [--epochs 4] [--seeds 1,2] [--lr 0.2]
                                 [--train-limit 9984] [--runs fixed,fixed-4,elastic]
                                 [--results FILE] [--table-only]
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cifar10_accuracy as accuracy_bench  # noqa: E402

SLOTS = 4
PORT = 29960
STOPPED = 3
# The same job at a fixed size: bench/cifar10_accuracy.py's all-reduce runs of 2 and 4 ranks (the
# global batch split in 2 or 4), beside the elastic one, whose world goes between 2 and 4.
FIXED_RANKS = {"fixed": 2, "fixed-4": 4}
RUNS = ["fixed", "fixed-4", "elastic"]
STEP_LINE = re.compile(r"epoch \d+/\d+ step (\d+) ")
ROUND_LINE = re.compile(r"rank \d+ of (\d+): gloo process group of round")
RESUMED_LINE = re.compile(r"resumed at step (\d+)")


def schedule(steps_per_epoch, epochs, join_lead):
    """(chief's step, action, slots): a resize mid-epoch and one at each epoch's end. A join is
    asked `join_lead` steps early (the newcomer starts, reads the data, builds the model, then
    joins at the next step the ranks agree on), a leave one step early (SIGTERM: the rank leaves
    at the next step boundary)."""
    s = steps_per_epoch
    lead = {"join": join_lead, "leave": 1}
    events = []
    pattern = [("join", [2]), ("join", [3]), ("leave", [3]), ("leave", [2])]
    for epoch in range(epochs):
        mid, end = epoch * s + s // 2, (epoch + 1) * s
        if epoch == epochs - 1:
            action, slots = ("leave", [2, 3]) if epoch % 2 else ("join", [2])
            events.append((mid - lead[action], action, slots))
            break
        for at, (action, slots) in ((mid, pattern[(2 * epoch) % 4]),
                                    (end, pattern[(2 * epoch + 1) % 4])):
            events.append((at - lead[action], action, slots))
    return events


def newest_step(logs):
    newest = 0
    for path in logs:
        if os.path.exists(path):
            for match in STEP_LINE.finditer(open(path, errors="replace").read()):
                newest = max(newest, int(match.group(1)))
    return newest


def worlds_of(chief_log):
    """[(step, ranks)] of each round slot 0 trained in: the step it resumed at (the first round,
    of a fresh run, at 0)."""
    rounds = []
    for line in open(chief_log, errors="replace"):
        if m := ROUND_LINE.search(line):
            rounds.append([None, int(m.group(1))])
        elif (m := RESUMED_LINE.search(line)) and rounds and rounds[-1][0] is None:
            rounds[-1][0] = int(m.group(1))
    return [(step or 0, size) for step, size in rounds]


def epochs_not_training_each_sample_once(monitor, samples):
    """Epochs whose sample tally is not that of each of the dataset indices 0..samples-1 once
    (count N, index sum N(N-1)/2, square sum (N-1)N(2N-1)/6): monitor.jsonl's `samples`."""
    n = samples
    once = {"count": n, "index_sum": n * (n - 1) // 2,
            "index_square_sum": (n - 1) * n * (2 * n - 1) // 6}
    return [r["epoch"] for r in map(json.loads, open(monitor)) if r.get("samples") != once]


def run_elastic(args, seed, data_dir):
    binary = os.path.join(args.build, "bin", "cifar-train")
    with tempfile.TemporaryDirectory() as work:
        model_dir = os.path.join(work, "model")
        base = accuracy_bench.recipe(args, seed) + ["-d", "cifar10", "--data-dir", data_dir]
        flags = base + ["--strategy", "allreduce", "-b", str(args.batch // SLOTS), "-t", "1",
                        "--workers", "1",
                        "--min-ranks", "2", "--rendezvous-settle", "1", "--metrics-port", "-1",
                        "--progress", "lines", "--log-every", "1", "-md", model_dir]
        processes, logs = {}, []

        def start(slot):
            log = os.path.join(work, f"slot{slot}-{len(logs)}.log")
            logs.append(log)
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(PORT),
                       WORLD_SIZE=str(SLOTS), RANK=str(slot))
            processes[slot] = subprocess.Popen([binary] + flags, env=env,
                                               stdout=open(log, "w"), stderr=subprocess.STDOUT)

        started = time.monotonic()
        store = subprocess.Popen([binary, "rendezvous-store", "--port", str(PORT)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        failure = None
        try:
            start(0)
            start(1)
            chief_log = logs[0]
            steps_per_epoch = args.train_limit // args.batch
            for step, action, slots in schedule(steps_per_epoch, args.epochs, args.join_lead):
                while newest_step(logs) < step:
                    if processes[0].poll() is not None:
                        raise RuntimeError(f"slot 0 exited {processes[0].returncode}")
                    time.sleep(0.2)
                for slot in slots:
                    if action == "join":
                        start(slot)
                    else:
                        processes[slot].send_signal(signal.SIGTERM)
                print(f"  step {newest_step(logs)}: {action} {slots}", file=sys.stderr,
                      flush=True)
            code = processes[0].wait()
            for slot, process in processes.items():
                # A rank asked to leave exits 3 (stopped, contract/exit_codes.h); one that
                # trained to the end, 0.
                if slot != 0 and process.wait(timeout=120) not in (0, STOPPED):
                    failure = f"slot {slot} exited {process.returncode}"
            if code != 0:
                failure = f"slot 0 exited {code}"
        except Exception as e:  # noqa: BLE001: recorded as the run's failure
            failure = str(e)
        finally:
            for process in list(processes.values()) + [store]:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        seconds = time.monotonic() - started
        monitor = os.path.join(model_dir, "monitor.jsonl")
        accuracies = accuracy_bench.per_epoch_accuracy(monitor) if os.path.exists(monitor) else []
        if failure is None and len(accuracies) < args.epochs:
            failure = f"{len(accuracies)} epochs recorded"
        if failure:
            print(f"  failed: {failure}; " + open(chief_log).read()[-600:], file=sys.stderr)
        return {"run": "elastic", "seed": seed, "epochs": args.epochs, "lr": args.lr,
                "batch": args.batch, "train_limit": args.train_limit, "test_limit": 0,
                "accuracy": accuracies, "seconds": round(seconds, 1), "failure": failure,
                "worlds": worlds_of(chief_log),
                "epochs_not_each_sample_once":
                    epochs_not_training_each_sample_once(monitor, args.train_limit)
                    if os.path.exists(monitor) else list(range(1, args.epochs + 1)),
                "command": "bench/elastic_accuracy.py (" + " ".join(flags).replace(work, "<tmp>")
                           .replace(data_dir, "<cifar10>") + ")"}


def run_one(run, args, seed, data_dir):
    if run == "elastic":
        return run_elastic(args, seed, data_dir)
    result = accuracy_bench.run_one(f"allreduce-{FIXED_RANKS[run]}", args, seed, data_dir)
    result["run"] = run
    return result


def print_table(results, args):
    mine = [r for r in results if accuracy_bench.same_recipe(r, args) and not r["failure"]]
    seeds = sorted({r["seed"] for r in mine})
    final = {(r["run"], r["seed"]): r for r in mine}
    print(f"ResNet-20, the first {args.train_limit} CIFAR-10 training images, {args.epochs} "
          f"epochs, global batch {args.batch}, one-cycle peak lr {args.lr}; test accuracy on "
          "the 10,000 test images.\n")
    print("| seed | run | accuracy after each epoch | final | wall s | worlds (step: ranks) |")
    print("|---|---|---|---:|---:|---|")
    for seed in seeds:
        for run in RUNS:
            if r := final.get((run, seed)):
                fixed_world = f"0: {FIXED_RANKS.get(run)} (fixed)"
                worlds = ", ".join(f"{s}: {n}" for s, n in r.get("worlds", [])) or fixed_world
                print(f"| {seed} | {run} | "
                      f"{' / '.join(accuracy_bench.pct(a) for a in r['accuracy'])} | "
                      f"{accuracy_bench.pct(r['accuracy'][-1])} | {r['seconds']:.0f} | {worlds} |")
    print()
    for run in RUNS:
        finals = [100 * final[(run, s)]["accuracy"][-1] for s in seeds if (run, s) in final]
        if len(finals) > 1:
            print(f"{run}: final accuracy mean {statistics.mean(finals):.2f}%, standard "
                  f"deviation {statistics.stdev(finals):.2f} over {len(finals)} seeds")
    for reference in ("fixed", "fixed-4"):
        gaps = [100 * (final[("elastic", s)]["accuracy"][-1] - final[(reference, s)]["accuracy"][-1])
                for s in seeds if ("elastic", s) in final and (reference, s) in final]
        if gaps:
            spread = f", standard error {statistics.stdev(gaps) / len(gaps) ** 0.5:.2f}" \
                if len(gaps) > 1 else ""
            print(f"elastic - {reference}, final accuracy per seed: "
                  f"{', '.join(f'{g:+.2f}' for g in gaps)} points (mean {statistics.mean(gaps):+.2f}"
                  f"{spread})")
    for r in mine:
        if r["run"] == "elastic":
            print(f"seed {r['seed']}: epochs not training each sample once: "
                  f"{r['epochs_not_each_sample_once'] or 'none'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(accuracy_bench.REPO, "build"))
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--batch", type=int, default=128, help="global batch")
    parser.add_argument("--train-limit", type=int, default=9984,
                        help="train on the first N images (a multiple of the global batch, so "
                        "that an epoch trains each once)")
    parser.add_argument("--join-lead", type=int, default=8,
                        help="steps before a resize that a newcomer is started")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"of {RUNS}")
    parser.add_argument("--results", default="elastic-accuracy.jsonl")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    args.test_limit = 0
    if args.train_limit % args.batch or args.batch % SLOTS:
        parser.error(f"--train-limit must be a multiple of --batch, and --batch of {SLOTS}")
    runs = args.runs.split(",")
    if set(runs) - set(RUNS):
        parser.error(f"unknown runs {sorted(set(runs) - set(RUNS))}: choose from {RUNS}")
    accuracy_bench.run_and_tabulate(args, runs, run_one, print_table)


if __name__ == "__main__":
    main()
