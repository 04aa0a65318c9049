#!/usr/bin/python3
"""torchvision side of the data-pipeline benchmark (bench/data_pipeline.sh runs both).

Reads the same CIFAR-10 binary files as bench-data-pipeline into memory as uint8 and iterates a
torch DataLoader over a torchvision.datasets.CIFAR10-style dataset (PIL image per sample, then
RandomCrop(32, padding=4), RandomHorizontalFlip, ToTensor, Normalize), shuffle=True.
Run with /usr/bin/python3 (Debian's python3-torch / python3-torchvision).
"""
import argparse
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

from cifar10_torch import read_cifar10  # the binary reader of the accuracy benchmark

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def read_cifar10_train(directory):
    images, labels = read_cifar10(directory, [f"data_batch_{i}.bin" for i in range(1, 6)], 0)
    # HWC, as torchvision's CIFAR10 keeps it for Image.fromarray
    return images.permute(0, 2, 3, 1).numpy().copy(), labels.numpy()


class InMemoryCifar(Dataset):
    """What torchvision.datasets.CIFAR10.__getitem__ does, minus the pickle loading."""

    def __init__(self, images, labels, transform, pil):
        self.images = images if pil else torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
        self.labels = labels
        self.transform = transform
        self.pil = pil

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = Image.fromarray(self.images[i]) if self.pil else self.images[i]
        return self.transform(img), int(self.labels[i])


def make_transform(pil):
    if pil:
        return transforms.Compose([
            transforms.RandomCrop(32, padding=4),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(MEAN, STD),
        ])
    # tensor path: uint8 CHW tensor in, the same operations
    return transforms.Compose([
        transforms.RandomCrop(32, padding=4),
        transforms.RandomHorizontalFlip(),
        transforms.ConvertImageDtype(torch.float32),
        transforms.Normalize(MEAN, STD),
    ])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="directory with CIFAR-10 binary files")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--cpu-batches", type=int, default=20)
    p.add_argument("--transforms", choices=["pil", "tensor"], default="pil")
    a = p.parse_args()

    images, labels = read_cifar10_train(a.data)
    pil = a.transforms == "pil"
    ds = InMemoryCifar(images, labels, make_transform(pil), pil)

    # Throughput: whole epochs, worker start-up included (the default, non-persistent workers).
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers)
    best = 0.0
    for e in range(a.epochs):
        t0 = time.perf_counter()
        n = 0
        for x, y in loader:
            n += len(y)
        s = time.perf_counter() - t0
        print(f"epoch {e}: {n} images in {s:.3f} s = {n / s:.0f} images/s")
        best = max(best, n / s)

    # Single-thread CPU time per batch: build batches in this process.
    torch.set_num_threads(1)
    inline = iter(DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=0))
    next(inline)  # warm-up
    c0 = time.process_time()
    for _ in range(a.cpu_batches):
        next(inline)
    cpu_ms = (time.process_time() - c0) * 1e3 / a.cpu_batches

    print(f"images: {len(ds)}  workers: {a.workers}  batch: {a.batch}  transforms: {a.transforms}")
    print(f"images_per_s: {best:.0f}")
    print(f"cpu_ms_per_batch: {cpu_ms:.3f}")


if __name__ == "__main__":
    main()
