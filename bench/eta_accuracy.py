#!/usr/bin/env python3
"""The ETA of `kubectl get ctj` against a job's real end, from a poll log that
bench/eta_accuracy.sh writes: one line per reading, "SECONDS STATE STEP PERCENT ETA UPDATED_AT"
(None where a field was absent). Prints the error of the estimates the operator reported, and of
a replay of the same readings with the estimate smoothed as the operator now does it
(operator/cifartrainjob/progress.cpp, kEstimateSmoothing).

Usage: bench/eta_accuracy.py POLL_LOG TOTAL_STEPS [SMOOTHING]
"""
import sys


def summary(errors):
    half = len(errors) // 2
    return (sum(map(abs, errors)) / len(errors), max(map(abs, errors[:half])),
            max(map(abs, errors[half:])))


def main():
    log, total = sys.argv[1], int(sys.argv[2])
    smoothing = float(sys.argv[3]) if len(sys.argv) > 3 else 0.3
    rows = [line.split() for line in open(log) if line.strip()]
    end = next(int(r[0]) for r in rows if r[1] == "Succeeded")
    running = [r for r in rows if r[1] == "Running" and r[2] != "None"]
    reported = [int(r[0]) + int(r[4]) - end for r in running if r[4] != "None"]
    replayed, previous, estimate = [], None, None
    for r in running:
        t, step = int(r[0]), int(r[2])
        if previous and step > previous[1] and t > previous[0]:
            fresh = (total - step) * (t - previous[0]) / (step - previous[1])
            estimate = fresh if estimate is None else (
                smoothing * fresh + (1 - smoothing) * max(estimate - (t - previous[0]), 0))
            replayed.append(t + estimate - end)
        previous = (t, step)
    print("| estimate | mean abs error | largest error, first half of the run | largest, second half |")
    print("|---|---|---|---|")
    print("| rate over the last write only (as run) | %.0f s | %.0f s | %.0f s |" % summary(reported))
    print(f"| smoothed {smoothing} new / {1 - smoothing:.1f} previous counted down (a replay of the "
          "same readings) | %.0f s | %.0f s | %.0f s |" % summary(replayed))


if __name__ == "__main__":
    main()
