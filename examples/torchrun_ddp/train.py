"""A plain data-parallel script for torchrun: a process group, a
DistributedSampler, DDP. Items wait on (simulated) remote storage. Each rank
trains on its own GPU (NCCL) when there is one per rank, else on the CPU (gloo).

    torchrun --standalone --nproc_per_node 2 train.py
    tuneloop init -- torchrun --standalone --nproc_per_node 2 train.py
"""
import argparse
import os
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
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    # NCCL needs a GPU of its own for each rank on this node.
    cuda = torch.cuda.device_count() >= int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = RemoteItems()
    sampler = DistributedSampler(data, shuffle=True)
    loader = DataLoader(data, batch_size=16, sampler=sampler, num_workers=args.workers)
    model = DDP(nn.Linear(32, 4).to(device), device_ids=[local_rank] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            # Asynchronous when the loader pins its batches (pin_memory=True).
            x = x.to(device, non_blocking=loader.pin_memory)
            y = y.to(device, non_blocking=loader.pin_memory)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
