"""A small real training job whose input pipeline is the bottleneck.

Each item costs a little simulated storage latency (time.sleep, as a network
or disk read would) plus real CPU work (decoding: a few small FFTs), so with the
default ``num_workers=0`` the training step waits on data most of the time.
tuneloop imports ``build()`` and times the loop itself. The model trains on the
GPU when there is one (``device`` tells the harness where to copy each batch),
else on the CPU.
"""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

IO_LATENCY_S = 0.002  # per item, like a read from network storage
FEATURES = 256
CLASSES = 10


class SlowDataset(Dataset):
    def __init__(self, n=1024):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(IO_LATENCY_S)  # "read" the item
        g = torch.Generator().manual_seed(i)
        raw = torch.randn(4, FEATURES, generator=g)
        x = torch.fft.rfft(raw, dim=1).abs()[:, :FEATURES // 2].flatten()  # "decode"
        y = i % CLASSES
        return x, y


def build():
    torch.set_num_threads(1)
    ds = SlowDataset()
    loader = DataLoader(
        ds,
        batch_size=32,
        shuffle=True,
    )
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(2 * FEATURES, 256), nn.ReLU(), nn.Linear(256, CLASSES))
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return {"loader": loader, "model": model, "optimizer": opt, "device": device}
