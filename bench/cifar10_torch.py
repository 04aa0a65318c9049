#!/usr/bin/python3
"""The PyTorch reference of bench/cifar10_accuracy.py: cifar-train's training recipe, written
again in plain PyTorch, on the same CIFAR-10 binary files.

What it mirrors of the C++ runtime (runtime/train, runtime/data), so that a difference in accuracy
is a difference in the systems and not in the recipe:
- the model: bench/torch_models.py's twin of runtime/models (same layers, same initialisation);
- the data: the official binary layout that `-d cifar10` reads; per-channel mean and standard
  deviation of the training images (data/stats.cpp); pad 4 with black pixels, random 32x32 crop,
  horizontal flip with probability 1/2, then (x/255 - mean) / std (data/augment.cpp); a fresh
  shuffle each epoch, the last incomplete batch dropped (train/batches.cpp);
- the step: SGD, Nesterov momentum 0.9, weight decay 5e-4 on every parameter, cross-entropy with
  label smoothing (train/optimizer.cpp, train/loss.cpp), the learning rate set before every
  update from the same schedule (train/lr_schedule.cpp);
- data parallelism (--world-size W): DDP over Gloo, W processes, each taking every W-th image of
  the epoch's permutation and a per-rank batch (data/loader.cpp), so one update averages W
  half-batches as an all-reduce or a synchronous PS round does; rank 0 evaluates.
It reads neither cifar-train's random streams nor its files, so the runs agree in distribution,
not bit for bit. After every epoch it appends a JSON line (epoch, test_accuracy, test_loss,
train_loss, seconds) to --out. Run with Debian's /usr/bin/python3 (python3-torch).

Usage: bench/cifar10_torch.py --data-dir DIR [-m resnet20] [-e 4] [-b 128] [--lr 0.2]
                              [--schedule onecycle] [--label-smoothing 0.1] [-s 1] [-t 2]
                              [--world-size 1] [--out FILE] [--train-limit N] [--test-limit N]
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]
TEST_FILES = ["test_batch.bin"]
RECORD = 1 + 3 * 32 * 32  # a label byte, then the red, green and blue 32x32 planes
CROP_PADDING = 4
EVAL_BATCH = 256  # cifar-train evaluates in batches of max(batch, 256)


def read_cifar10(directory, names, limit):
    """Images N x 3 x 32 x 32 uint8 and labels N int64 from the official binary files."""
    records = []
    for name in names:
        path = os.path.join(directory, name)
        raw = np.fromfile(path, dtype=np.uint8)
        if raw.size % RECORD:
            sys.exit(f"cifar10_torch: {path} is {raw.size} bytes, not a whole number of "
                     f"{RECORD}-byte records")
        records.append(raw.reshape(-1, RECORD))
    data = np.concatenate(records)
    if limit:
        data = data[:limit]
    labels = torch.from_numpy(data[:, 0].astype(np.int64))
    images = torch.from_numpy(np.ascontiguousarray(data[:, 1:])).view(-1, 3, 32, 32)
    return images, labels


def channel_stats(images):
    """Mean and standard deviation of x/255 per channel over the whole set (data/stats.cpp)."""
    x = images.double().div_(255).transpose(0, 1).reshape(3, -1)
    mean = x.mean(1)
    std = (x.pow(2).mean(1) - mean.pow(2)).clamp_min(0).sqrt()
    return mean.float().view(1, 3, 1, 1), std.float().view(1, 3, 1, 1)


def normalize(images, mean, std):
    return (images.float() / 255 - mean) / std  # torchvision's ToTensor + Normalize order


def augment(images, generator):
    """Random crop from a 4-pixel black border, then a horizontal flip with probability 1/2."""
    n, _, h, w = images.shape
    padded = F.pad(images, (CROP_PADDING,) * 4)
    dy = torch.randint(0, 2 * CROP_PADDING + 1, (n,), generator=generator)
    dx = torch.randint(0, 2 * CROP_PADDING + 1, (n,), generator=generator)
    rows = (dy[:, None] + torch.arange(h))[:, None, :, None]
    cols = (dx[:, None] + torch.arange(w))[:, None, None, :]
    crops = padded[torch.arange(n)[:, None, None, None], torch.arange(3)[None, :, None, None],
                   rows, cols]
    flip = torch.rand(n, generator=generator) < 0.5
    crops[flip] = crops[flip].flip(3)
    return crops


def learning_rate(args, step, steps_per_epoch, total_steps):
    """train/lr_schedule.cpp, line for line."""
    total = max(total_steps, 1)
    final_lr = args.lr * args.final_lr_fraction

    def cosine(start, end, progress):
        return end + (start - end) * 0.5 * (1 + math.cos(math.pi * min(max(progress, 0), 1)))

    if args.schedule == "onecycle":
        peak = max(1.0, 0.25 * total)
        if step < peak:
            return args.lr * (step + 1) / peak
        return cosine(args.lr, final_lr, (step - peak) / max(1.0, total - peak))
    warmup = args.warmup_epochs * steps_per_epoch
    if step < warmup:
        return args.lr * (step + 1) / warmup
    if args.schedule == "cosine":
        return cosine(args.lr, final_lr, (step - warmup) / max(1.0, total - warmup))
    return args.lr  # constant


def evaluate(model, images, labels, mean, std):
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for first in range(0, len(labels), EVAL_BATCH):
            logits = model(normalize(images[first:first + EVAL_BATCH], mean, std))
            target = labels[first:first + EVAL_BATCH]
            loss += F.cross_entropy(logits, target, reduction="sum").item()
            correct += (logits.argmax(1) == target).sum().item()
    model.train()
    return correct / len(labels), loss / len(labels)


def train(rank, args):
    torch.set_num_threads(args.threads)
    world = args.world_size
    if world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(args.master_port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)  # every rank starts from the same weights, as DDP expects
    train_images, train_labels = read_cifar10(args.data_dir, TRAIN_FILES, args.train_limit)
    test_images, test_labels = read_cifar10(args.data_dir, TEST_FILES, args.test_limit)
    mean, std = channel_stats(train_images)

    model = torch_models.make_model(args.model, num_classes=args.num_classes)
    model.init_from_data(normalize(train_images[:5000], mean, std))
    step_model = model
    if world > 1:
        step_model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                nesterov=not args.no_nesterov, weight_decay=args.weight_decay)

    per_rank = len(train_labels) // world
    steps_per_epoch = per_rank // args.batch_size
    if steps_per_epoch == 0:
        sys.exit(f"cifar10_torch: batch {args.batch_size} is larger than the {per_rank} images "
                 "of a rank")
    total_steps = steps_per_epoch * args.epochs
    shuffle = torch.Generator().manual_seed(args.seed)  # the same permutation on every rank
    crops = torch.Generator().manual_seed(args.seed * 1000 + rank + 1)
    step = 0
    start = time.monotonic()
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(len(train_labels), generator=shuffle)[rank::world][:per_rank]
        loss_sum = 0.0
        for b in range(steps_per_epoch):
            index = order[b * args.batch_size:(b + 1) * args.batch_size]
            images = train_images[index]
            if not args.no_augment:
                images = augment(images, crops)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(args, step, steps_per_epoch, total_steps)
            logits = step_model(normalize(images, mean, std))
            loss = F.cross_entropy(logits, train_labels[index],
                                   label_smoothing=args.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
            step += 1
        if rank == 0:
            accuracy, test_loss = evaluate(model, test_images, test_labels, mean, std)
            record = {"epoch": epoch, "test_accuracy": accuracy, "test_loss": test_loss,
                      "train_loss": loss_sum / steps_per_epoch,
                      "seconds": round(time.monotonic() - start, 1)}
            print(json.dumps(record), flush=True)
            if args.out:
                with open(args.out, "a") as out:
                    out.write(json.dumps(record) + "\n")
    if world > 1:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="the cifar-10-batches-bin directory")
    parser.add_argument("-d", "--dataset", default="cifar10", choices=["cifar10"])
    parser.add_argument("-m", "--model", default="resnet20", choices=torch_models.MODEL_NAMES)
    parser.add_argument("-nc", "--num-classes", type=int, default=10)
    parser.add_argument("-e", "--epochs", type=int, default=4)
    parser.add_argument("-b", "--batch-size", type=int, default=128, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--schedule", default="cosine", choices=["constant", "cosine",
                                                                   "onecycle"])
    parser.add_argument("--warmup-epochs", type=float, default=0)
    parser.add_argument("--final-lr-fraction", type=float, default=0)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--no-nesterov", action="store_true")
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--label-smoothing", type=float, default=0)
    parser.add_argument("--no-augment", action="store_true")
    parser.add_argument("--train-limit", type=int, default=0)
    parser.add_argument("--test-limit", type=int, default=0)
    parser.add_argument("-s", "--seed", type=int, default=1)
    parser.add_argument("-t", "--threads", type=int, default=2, help="intra-op threads per rank")
    parser.add_argument("--world-size", type=int, default=1, help="DDP ranks (Gloo)")
    parser.add_argument("--master-port", type=int, default=29960)
    parser.add_argument("--out", help="append one JSON line per epoch here")
    args = parser.parse_args()
    for name in TRAIN_FILES + TEST_FILES:
        if not os.path.isfile(os.path.join(args.data_dir, name)):
            parser.error(f"{os.path.join(args.data_dir, name)} is missing: --data-dir must be a "
                         "cifar-10-batches-bin directory (scripts/cifar10-data.sh prints one)")
    if args.world_size < 1:
        parser.error("--world-size must be at least 1")
    if args.world_size == 1:
        train(0, args)
    else:
        torch.multiprocessing.spawn(train, args=(args,), nprocs=args.world_size)


if __name__ == "__main__":
    main()
