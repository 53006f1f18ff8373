"""A plain data-parallel script for torchrun: a process group, a
DistributedSampler, DDP. Items wait on (simulated) remote storage.

    torchrun --standalone --nproc_per_node 2 train.py
    tuneloop init -- torchrun --standalone --nproc_per_node 2 train.py
"""
import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class RemoteItems(Dataset):
    def __len__(self):
        return 1024

    def __getitem__(self, i):
        time.sleep(0.002)  # storage latency
        g = torch.Generator().manual_seed(i)
        return torch.randn(32, generator=g), i % 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = RemoteItems()
    sampler = DistributedSampler(data, shuffle=True)
    loader = DataLoader(data, batch_size=16, sampler=sampler, num_workers=args.workers)
    model = DDP(nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
