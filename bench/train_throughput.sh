#!/usr/bin/env bash
# Training images/s: cifar-train (C++, its real threaded data loader included) against the same
# model, batch, optimizer and thread count in PyTorch Python (same LibTorch 1.13 underneath).
# Throughput on these VMs drifts by ~10% over minutes, so the two sides alternate for ROUNDS
# rounds and the table shows medians (every round's numbers follow it).
#   bench/train_throughput.sh [build-dir] [steps] [models...]      ROUNDS=3 by default
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
steps=${2:-20}
shift $(($# > 2 ? 2 : $#)) || true
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(simplecnn alexnet resnet20)
rounds=${ROUNDS:-3}
threads=$(nproc)
batch=128
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

results="$work/results.jsonl"
for m in "${models[@]}"; do
  for r in $(seq "$rounds"); do
    log="$work/$m-$r.log"
    rm -rf "$work/$m"
    "$build/bin/cifar-train" -m "$m" -d synthetic --data-dir "$work/data" \
      --synthetic-train-size $((batch * (steps + 4))) --synthetic-test-size 256 \
      -md "$work/$m" -b $batch -t "$threads" --max-steps $((steps + 3)) -e 1 \
      --progress none --metrics-port -1 >"$log" 2>&1 || { cat "$log"; exit 1; }
    /usr/bin/python3 - "$m" "$r" "$log" >>"$results" <<'PY'
import json, re, sys
model, rnd, log = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
ips = float(re.search(r"\(([0-9.]+) img/s after warm-up\)", log).group(1))
p = re.search(r"data wait ([0-9.]+)%, forward ([0-9.]+)%, backward ([0-9.]+)%, "
              r"communication [0-9.]+%, optimizer ([0-9.]+)%, other ([0-9.]+)%", log).groups()
print(json.dumps({"side": "cpp", "model": model, "round": rnd, "images_per_second": ips,
                  "phases": dict(zip(["data_wait", "forward", "backward", "optimizer", "other"],
                                     [float(x) / 100 for x in p]))}))
PY
    /usr/bin/python3 "$here/train_throughput.py" --model "$m" --batch-size $batch \
      --threads "$threads" --steps "$steps" |
      /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); r.update(side="python", round=int(sys.argv[1])); print(json.dumps(r))' "$r" >>"$results"
  done
done

/usr/bin/python3 - "$results" "$build" "$steps" "$rounds" "$threads" "${models[*]}" <<'PY'
import json, statistics, sys
path, build, steps, rounds, threads, models = sys.argv[1:]
rows = [json.loads(l) for l in open(path)]
print(f"Training throughput, batch 128, {threads} threads, {steps} steps after 3 warm-up steps, "
      f"median of {rounds} alternating rounds.\n")
print("| model | cifar-train img/s | PyTorch Python img/s | ratio C++/Python | "
      "C++ step time: data wait / fwd / bwd / opt / other | Python: fwd / bwd / opt / other |")
print("|---|---:|---:|---:|---|---|")
def median_phases(rs, keys):
    return " / ".join("%.1f" % (100 * statistics.median(r["phases"][k] for r in rs)) for k in keys) + " %"
for m in models.split():
    cpp = [r for r in rows if r["model"] == m and r["side"] == "cpp"]
    py = [r for r in rows if r["model"] == m and r["side"] == "python"]
    c = statistics.median(r["images_per_second"] for r in cpp)
    p = statistics.median(r["images_per_second"] for r in py)
    print(f"| {m} | {c:.1f} | {p:.1f} | {c / p:.2f} | "
          f"{median_phases(cpp, ['data_wait', 'forward', 'backward', 'optimizer', 'other'])} | "
          f"{median_phases(py, ['forward', 'backward', 'optimizer', 'other'])} |")
print("\nEvery round (C++ / Python img/s):")
for m in models.split():
    pairs = [(r["images_per_second"], q["images_per_second"])
             for r in rows if r["model"] == m and r["side"] == "cpp"
             for q in rows if q["model"] == m and q["side"] == "python" and q["round"] == r["round"]]
    print(f"- {m}: " + ", ".join(f"{a:.0f} / {b:.0f}" for a, b in pairs))
print(f"\nCommand: ROUNDS={rounds} bench/train_throughput.sh {build} {steps} {models}")
PY
