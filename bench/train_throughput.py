"""PyTorch (Python) side of the training-throughput benchmark.

Same model (bench/torch_models.py twins of the C++ zoo), batch, optimizer and thread count as
cifar-train; images are pre-made tensors, so Python pays nothing for data loading (the C++ side
runs its real threaded loader). Prints one JSON line. Run with Debian's /usr/bin/python3.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

WARMUP_STEPS = 3  # the same warm-up cifar-train excludes from its steady-state figure


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    model = torch_models.make_model(args.model, num_classes=10, in_channels=3)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    images = torch.randn(args.batch_size, 3, 32, 32)
    labels = torch.randint(0, 10, (args.batch_size,))

    phases = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0, "other": 0.0}
    images_done = 0
    steady_seconds = 0.0
    for step in range(WARMUP_STEPS + args.steps):
        t0 = time.perf_counter()
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        t1 = time.perf_counter()
        optimizer.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()
        # cifar-train reads loss and accuracy every step; so does this loop.
        loss.item()
        (logits.argmax(1) == labels).sum().item()
        t4 = time.perf_counter()
        if step >= WARMUP_STEPS:
            phases["forward"] += t1 - t0
            phases["backward"] += t2 - t1
            phases["optimizer"] += t3 - t2
            phases["other"] += t4 - t3
            steady_seconds += t4 - t0
            images_done += args.batch_size
    print(json.dumps({"model": args.model, "images_per_second": images_done / steady_seconds,
                      "phases": {k: v / steady_seconds for k, v in phases.items()}}))


if __name__ == "__main__":
    main()
