"""CPU-bound decoding: every item is decoded with real CPU work.

Each item is "decoded" from a seeded random signal by a stack of real torch
operations (2-D FFT, a filter, an inverse FFT, a pooling), about a millisecond
and a half of one core and no waiting; a batch of 16 costs about 25 ms. Workers run in parallel only as far as
there are cores for them: throughput rises up to about the core count and is
flat (or falls) beyond it, while data_wait stays large because the CPU, not the
loader's settings, is the limit. Best setting: num_workers near the core count
(2-3 on 2 cores); nothing else matters much.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SIDE = 160
CLASSES = 10


class EncodedImages(Dataset):
    def __len__(self):
        return 8192

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        raw = torch.randn(3, SIDE, SIDE, generator=g)  # the "encoded" bytes
        spec = torch.fft.rfft2(raw)  # "decode": to the frequency domain,
        fy = torch.fft.fftfreq(SIDE).abs().unsqueeze(1)
        fx = torch.fft.rfftfreq(SIDE).unsqueeze(0)
        spec = spec * torch.exp(-8.0 * (fy**2 + fx**2))  # low-pass,
        img = torch.fft.irfft2(spec, s=(SIDE, SIDE))  # back,
        img = torch.nn.functional.avg_pool2d(img.unsqueeze(0), 3).squeeze(0)  # downscale
        img = (img - img.mean()) / (img.std() + 1e-6)
        return img, i % CLASSES


def build():
    torch.set_num_threads(1)
    loader = DataLoader(
        EncodedImages(),
        batch_size=16,
        shuffle=True,
    )
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * (SIDE // 3) ** 2, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return {"loader": loader, "model": model, "optimizer": opt}
