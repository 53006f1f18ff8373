"""Costly per-worker start-up over short epochs: persistent_workers matters.

Every process that reads items first opens the dataset's shard store
(``open_store``: a connection and an index, ``STORE_OPEN_S`` of waiting plus a
little CPU), lazily, as a handle that cannot cross a fork. Items then cost
``IO_LATENCY_S`` each. An epoch is only 12 batches, so a measurement spans
several epochs, and without persistent_workers every epoch starts fresh
workers that open the store again. More workers still pay (the item reads
overlap), but the start-up they repeat each epoch caps the gain; keeping them
alive across epochs removes it. Best setting: persistent_workers=True with
many workers (8-16: the reads overlap, and an epoch has 12 batches).
"""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

STORE_OPEN_S = 0.1  # per process: connect and read the shard index
IO_LATENCY_S = 0.003  # per item
FEATURES = 64
CLASSES = 10


class ShardedItems(Dataset):
    def __init__(self):
        self.store = None  # opened in the process that reads (not picklable in real life)

    def __len__(self):
        return 192  # 12 batches: a short epoch

    def open_store(self):
        time.sleep(STORE_OPEN_S)
        index = {k: (k * 2654435761) % 1000003 for k in range(50_000)}  # parse the index
        return index

    def __getitem__(self, i):
        if self.store is None:
            self.store = self.open_store()
        time.sleep(IO_LATENCY_S)
        g = torch.Generator().manual_seed(self.store[i] % 100_000)
        return torch.randn(FEATURES, generator=g), i % CLASSES


def build():
    torch.set_num_threads(1)
    loader = DataLoader(
        ShardedItems(),
        batch_size=16,
        shuffle=True,
    )
    model = nn.Sequential(nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return {"loader": loader, "model": model, "optimizer": opt}
