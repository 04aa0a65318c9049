"""PyTorch DDP (Python, Gloo) side of the all-reduce step-time benchmark.

Starts `--world` rank processes of itself on loopback; each trains the bench/torch_models.py twin
of a cifar-train model under DistributedDataParallel with the given bucket size (DDP's first
bucket is 1 MB, as cifar-train's default), one intra-op thread, pre-made tensors (so Python pays
nothing for data). Rank 0 prints one JSON line: its mean step time after the warm-up steps.
Run with Debian's /usr/bin/python3.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

WARMUP_STEPS = 3  # as cifar-train's "after warm-up" figure


def train_rank(args):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(1)
    model = torch_models.make_model(args.model, num_classes=10, in_channels=3)
    model.train()
    ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9, nesterov=True,
                                weight_decay=5e-4)
    torch.manual_seed(100 + rank)
    images = torch.randn(args.batch_size, 3, 32, 32)
    labels = torch.randint(0, 10, (args.batch_size,))
    steady = 0.0
    for step in range(WARMUP_STEPS + args.steps):
        start = time.perf_counter()
        logits = ddp(images)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()  # DDP's reducer all-reduces buckets from autograd hooks
        optimizer.step()
        loss.item()  # cifar-train reads loss and accuracy every step; so does this loop
        (logits.argmax(1) == labels).sum().item()
        if step >= WARMUP_STEPS:
            steady += time.perf_counter() - start
    if rank == 0:
        print(json.dumps({"model": args.model, "step_seconds": steady / args.steps}), flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    parser.add_argument("--bucket-cap-mb", type=float, default=25)
    parser.add_argument("--master-port", type=int, default=29611)
    args = parser.parse_args()
    if "RANK" in os.environ:
        train_rank(args)
        return
    ranks = []
    for rank in range(args.world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.world), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.master_port))
        ranks.append(subprocess.Popen([sys.executable] + sys.argv, env=env))
    codes = [r.wait() for r in ranks]
    if any(codes):
        sys.exit(f"a DDP rank failed: exit codes {codes}")


if __name__ == "__main__":
    main()
