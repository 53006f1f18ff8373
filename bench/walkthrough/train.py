import argparse
import math
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Records(Dataset):
    """Each item is decoded in Python, as a parser of text records would."""

    def __init__(self, n, seed):
        self.n = n
        self.seed = seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        k = self.seed * 100003 + i
        row = [math.sin(k * 0.001 + j) * math.cos(j * 0.37) for j in range(6000)]
        x = torch.tensor(row[:512], dtype=torch.float32)
        y = int(abs(sum(row[512:600])) * 10) % 10
        return x, y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.05)
    a = p.parse_args()
    torch.manual_seed(0)
    train = DataLoader(Records(3072, 1), batch_size=a.batch_size, shuffle=True, num_workers=a.workers)
    val = DataLoader(Records(512, 2), batch_size=128, num_workers=a.workers)
    model = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.time()
    seen = 0
    for epoch in range(a.epochs):
        model.train()
        for x, y in train:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            seen += len(x)
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in val:
                correct += (model(x).argmax(1) == y).sum().item()
        print(f"epoch {epoch} loss {loss.item():.4f} val_acc {correct / 512:.3f}")
    dt = time.time() - t0
    print(f"{seen / dt:.0f} samples/s, {dt:.1f} s")


if __name__ == "__main__":
    main()
