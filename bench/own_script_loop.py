"""The argparse example's training loop without tuneloop: samples/sec of whole
epochs (fill included) at a fixed worker count, to hold beside what
`bench/own_script_workers.sh` measures through tuneloop.

    python bench/own_script_loop.py WORKERS [EPOCHS]

One warm-up epoch, then EPOCHS (default 4) timed ones with persistent workers and
a 0.1 s pause between them (as validation would leave the workers idle); prints
the worker count, the median and every epoch's samples/sec.
"""
import os
import statistics
import sys
import time
import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "own_script"))
from train import RemoteItems  # noqa: E402


def main():
    warnings.filterwarnings("ignore", message=".*worker processes in total.*")
    n = int(sys.argv[1])
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    torch.manual_seed(0)
    loader = DataLoader(RemoteItems(2048), batch_size=32, shuffle=True,
                        num_workers=n, persistent_workers=n > 0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sps = []
    for epoch in range(epochs + 1):
        t0 = time.perf_counter()
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if epoch:
            sps.append(len(loader.dataset) / (time.perf_counter() - t0))
        time.sleep(0.1)
    print(n, round(statistics.median(sps)), [round(s) for s in sps], flush=True)


if __name__ == "__main__":
    main()
