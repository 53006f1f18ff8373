import argparse
import random
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def make_dataset(num_samples, num_features, num_classes, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_samples, num_features, generator=g)
    w = torch.randn(num_features, num_classes, generator=g)
    logits = torch.tanh(x @ w / num_features ** 0.5) * 3.0 + 0.3 * torch.randn(num_samples, num_classes, generator=g)
    y = logits.argmax(dim=1)
    return TensorDataset(x, y)


class MLP(nn.Module):
    def __init__(self, in_features, hidden, num_classes, depth=4, dropout=0.1):
        super().__init__()
        layers = []
        dim = in_features
        for _ in range(depth):
            layers += [nn.Linear(dim, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Dropout(dropout)]
            dim = hidden
        layers.append(nn.Linear(dim, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def parse_args():
    p = argparse.ArgumentParser(description="Train an MLP on synthetic tabular data")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--num-samples", type=int, default=6144)
    p.add_argument("--num-features", type=int, default=128)
    p.add_argument("--num-classes", type=int, default=20)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def main():
    args = parse_args()
    set_seed(args.seed)

    dataset = make_dataset(args.num_samples, args.num_features, args.num_classes, args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)

    model = MLP(args.num_features, args.hidden, args.num_classes, depth=args.depth)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    criterion = nn.CrossEntropyLoss()

    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        total_loss, correct, seen = 0.0, 0, 0
        for x, y in loader:
            optimizer.zero_grad()
            logits = model(x)
            loss = criterion(logits, y)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * y.size(0)
            correct += (logits.argmax(1) == y).sum().item()
            seen += y.size(0)
        print(f"epoch {epoch + 1}/{args.epochs}  loss {total_loss / seen:.4f}  acc {correct / seen:.3f}")
    print(f"total time: {time.time() - start:.2f}s")


if __name__ == "__main__":
    main()
