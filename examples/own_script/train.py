"""An ordinary training script, as people write them: argparse flags, a
main(), a loop over epochs, a validation loader after each epoch, a
checkpoint and a log line per epoch. Its items wait on (simulated) remote
storage, 2 ms each, so the training loop mostly waits for data. It trains on
the GPU when there is one, else on the CPU.

    python train.py --epochs 3            # how you would run it
    tuneloop init -- python train.py --epochs 3
    tuneloop start --agent builtin        # tunes it where it is, no adapter
"""
import argparse
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class RemoteItems(Dataset):
    """Items fetched one by one from slow storage."""

    def __init__(self, n, dim=64):
        self.n, self.dim = n, dim

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.002)  # storage latency
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), i % 10


def parse_args():
    ap = argparse.ArgumentParser(description="train a small classifier")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--out", default="checkpoints")
    return ap.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = DataLoader(RemoteItems(2048), batch_size=args.batch_size, shuffle=True,
                              num_workers=args.workers)
    val_loader = DataLoader(RemoteItems(256), batch_size=args.batch_size)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train.log"), "a")
    print(f"start: {vars(args)}", file=log, flush=True)
    for epoch in range(args.epochs):
        model.train()
        t0 = time.perf_counter()
        for x, y in train_loader:
            # Asynchronous when the loader pins its batches (pin_memory=True).
            x = x.to(device, non_blocking=train_loader.pin_memory)
            y = y.to(device, non_blocking=train_loader.pin_memory)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in val_loader:
                x, y = x.to(device), y.to(device)
                correct += (model(x).argmax(1) == y).sum().item()
        took = time.perf_counter() - t0
        print(f"epoch {epoch}: loss {loss.item():.3f}, val acc {correct / 256:.2f}, "
              f"{len(train_loader.dataset) / took:.0f} samples/sec")
        torch.save(model.state_dict(), os.path.join(args.out, "last.pt"))


if __name__ == "__main__":
    main()
