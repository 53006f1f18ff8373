"""Compute-bound step: the loader is not the bottleneck, the model is.

Items are slices of a tensor already in memory (no I/O, almost no CPU), while
the training step is a wide MLP that takes tens of milliseconds of CPU per
batch. data_wait is a few percent of the step even with the default
``num_workers=0``: no DataLoader setting can make it much faster, and tuneloop
should say so after the baseline, name the compute-side candidates, and stop
without a turn. Best setting: the default (any worker setting is within noise,
and workers only add start-up).
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FEATURES = 512
CLASSES = 10


class InMemory(Dataset):
    def __init__(self, n=4096):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, FEATURES, generator=g)
        self.y = torch.randint(0, CLASSES, (n,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def build():
    torch.set_num_threads(1)
    loader = DataLoader(
        InMemory(),
        batch_size=64,
        shuffle=True,
    )
    model = nn.Sequential(
        nn.Linear(FEATURES, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, CLASSES)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return {"loader": loader, "model": model, "optimizer": opt}
