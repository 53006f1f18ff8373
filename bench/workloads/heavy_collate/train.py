"""Heavy collate: the cost is per batch, in ``collate_fn``, not per item.

Items are cheap (a seeded, variable-length list of token ids). The collate
function does the real work, in pure Python as tokenising code often does:
hashes every token bigram into a fixed-size bag-of-features vector, pads the
sequences to the longest one and builds the attention mask. With
``num_workers=0`` that runs in the training process between steps; workers run
it in parallel, each on its own batch, up to the core count (it is CPU work
under the GIL of each worker). Best setting: num_workers near the core count
(2-4 on 2 cores).
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB = 5000
HASH_DIM = 256
MAX_LEN = 320
CLASSES = 4


class Sentences(Dataset):
    def __len__(self):
        return 8192

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        n = int(torch.randint(MAX_LEN // 2, MAX_LEN, (1,), generator=g))
        return torch.randint(1, VOCAB, (n,), generator=g).tolist(), i % CLASSES


def collate(items):
    feats = torch.zeros(len(items), HASH_DIM)
    longest = max(len(toks) for toks, _ in items)
    ids = torch.zeros(len(items), longest, dtype=torch.long)
    mask = torch.zeros(len(items), longest, dtype=torch.bool)
    for row, (toks, _) in enumerate(items):
        counts = [0.0] * HASH_DIM
        for a, b in zip(toks, toks[1:]):  # hashed bigrams, pure Python
            h = (a * 1000003) ^ (b * 998244353)
            for k in range(12):
                counts[(h >> (4 * k)) % HASH_DIM] += 1.0
        feats[row] = torch.tensor(counts) / max(1, len(toks) - 1)
        ids[row, : len(toks)] = torch.tensor(toks)
        mask[row, : len(toks)] = True
    labels = torch.tensor([y for _, y in items])
    return (feats, ids, mask), labels


class BagModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.head = nn.Sequential(nn.Linear(16 + HASH_DIM, 128), nn.ReLU(), nn.Linear(128, CLASSES))

    def forward(self, batch):
        feats, ids, mask = batch
        pooled = (self.emb(ids) * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
        return self.head(torch.cat([pooled, feats], dim=1))


def build():
    torch.set_num_threads(1)
    loader = DataLoader(
        Sentences(),
        batch_size=32,
        shuffle=True,
        collate_fn=collate,
    )
    model = BagModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    return {"loader": loader, "model": model, "optimizer": opt}
