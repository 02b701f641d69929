"""The repo's digits data set (data/digits.csv.gz: 1797 rows of 64 pixel
values 0..16 and a label) and a small MLP, for the tests and bench.py."""

import csv
import gzip
import os
import time

import torch
from torch import nn

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "data", "digits.csv.gz")


def load(seed=0, test_fraction=0.2):
    """Returns (x_train, y_train, x_test, y_test): features scaled to
    [0, 1], split by a seeded shuffle."""
    with gzip.open(DATA, "rt") as f:
        rows = [[int(v) for v in row] for row in csv.reader(f) if row]
    data = torch.tensor(rows, dtype=torch.float32)
    x, y = data[:, :64] / 16.0, data[:, 64].long()
    g = torch.Generator()
    g.manual_seed(seed)
    perm = torch.randperm(len(x), generator=g)
    n_test = int(len(x) * test_fraction)
    te, tr = perm[:n_test], perm[n_test:]
    return x[tr], y[tr], x[te], y[te]


def mlp(hidden=(32,), seed=0):
    """A ReLU MLP 64 -> hidden... -> 10 with seeded initial weights."""
    torch.manual_seed(seed)
    layers, width = [], 64
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def accuracy(model, x, y):
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean().item()) * 100.0


def pad_compute(start, n_local, global_batch, world, pad_ms, slow):
    """Sleeps so that the step's compute, begun at start, lasts pad_ms for
    an even share (global_batch/world samples) times slow, in proportion to
    n_local: a simulated device whose speed is 1/slow."""
    if pad_ms <= 0:
        return
    target = pad_ms / 1000.0 * (n_local / (global_batch / world)) * slow
    left = target - (time.perf_counter() - start)
    if left > 0:
        time.sleep(left)
