"""I/O-bound items: every item waits on (simulated) network storage.

Each item costs ``IO_LATENCY_S`` of waiting (time.sleep, as a read from remote
storage would) and almost no CPU, so a worker spends nearly all of its time
asleep. Workers overlap those waits: throughput keeps rising with
``num_workers`` well past the core count, until the loader outruns the
training step. Best setting: many workers, about the batch's
latency over the step time (70 ms / 6.5 ms: 11-16, on any machine);
persistent_workers changes nothing (one epoch spans the whole measurement).
"""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

IO_LATENCY_S = 0.002  # per item, like one small read from object storage
FEATURES = 128
CLASSES = 10


class RemoteItems(Dataset):
    def __len__(self):
        return 8192

    def __getitem__(self, i):
        time.sleep(IO_LATENCY_S)
        g = torch.Generator().manual_seed(i)
        return torch.randn(FEATURES, generator=g), i % CLASSES


def build():
    torch.set_num_threads(1)
    loader = DataLoader(
        RemoteItems(),
        batch_size=32,
        shuffle=True,
    )
    model = nn.Sequential(nn.Linear(FEATURES, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return {"loader": loader, "model": model, "optimizer": opt}
