import argparse
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms


NUM_CLASSES = 10
IMAGE_SIZE = 96
CROP_SIZE = 64


class SyntheticImageDataset(Dataset):
    """Generates images on the fly, mimicking a decode + augment pipeline.

    Each class has its own base colour and stripe frequency, so the task is
    learnable; per-sample noise and augmentation make every epoch different.
    """

    def __init__(self, num_samples, image_size=IMAGE_SIZE, crop_size=CROP_SIZE, seed=0):
        self.num_samples = num_samples
        self.image_size = image_size
        rng = np.random.default_rng(seed)
        self.labels = rng.integers(0, NUM_CLASSES, size=num_samples)
        self.sample_seeds = rng.integers(0, 2**31 - 1, size=num_samples)
        self.class_colours = rng.integers(40, 216, size=(NUM_CLASSES, 3))
        self.transform = transforms.Compose([
            transforms.RandomResizedCrop(crop_size, scale=(0.5, 1.0)),
            transforms.RandomHorizontalFlip(),
            transforms.ColorJitter(brightness=0.3, contrast=0.3, saturation=0.3, hue=0.05),
            transforms.RandomRotation(10),
            transforms.ToTensor(),
            transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ])

    def __len__(self):
        return self.num_samples

    def _render(self, idx):
        label = int(self.labels[idx])
        rng = np.random.default_rng(int(self.sample_seeds[idx]))
        size = self.image_size
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
        freq = 0.05 + 0.03 * label
        angle = rng.uniform(0, np.pi)
        stripes = np.sin(freq * (np.cos(angle) * xx + np.sin(angle) * yy))
        base = self.class_colours[label].astype(np.float32)
        img = base[None, None, :] + 40.0 * stripes[:, :, None]
        img += rng.normal(0, 20.0, size=img.shape).astype(np.float32)
        return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)), label

    def __getitem__(self, idx):
        img, label = self._render(idx)
        return self.transform(img), label


class SmallCNN(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, stride=2, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
        )
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def parse_args():
    p = argparse.ArgumentParser(description="Train a small CNN on synthetic images")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--num-samples", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def main():
    args = parse_args()
    set_seed(args.seed)

    dataset = SyntheticImageDataset(args.num_samples, seed=args.seed)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.num_workers,
    )

    model = SmallCNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        total_loss, correct, seen = 0.0, 0, 0
        for images, labels in loader:
            optimizer.zero_grad()
            logits = model(images)
            loss = criterion(logits, labels)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * labels.size(0)
            correct += (logits.argmax(1) == labels).sum().item()
            seen += labels.size(0)
        print(f"epoch {epoch + 1}/{args.epochs}  loss {total_loss / seen:.4f}  acc {correct / seen:.3f}")
    print(f"total time: {time.time() - start:.2f}s")


if __name__ == "__main__":
    main()
