"""A storage-bound image classifier, trained as people write it: argparse
flags, a Dataset that reads image files, decodes and augments them in the
DataLoader's workers, a torchvision ResNet-18 (random weights, nothing
downloaded), on the GPU when there is one.

The images are synthetic: at start it writes ``--images`` JPEG and PNG files
under ``--data`` (once; a later run reuses them). Each read also waits
``--latency-ms`` (``time.sleep``), as a network or object store would, so with
the default ``--workers 0`` the step mostly waits for data.

    python image_train.py --data /tmp/images --epochs 1
    tuneloop init -- python image_train.py --data /tmp/images --epochs 1
    tuneloop start --agent builtin

Without torchvision it trains a small conv net instead and decodes with PIL
and plain tensor ops; its first line says which model it trains.
"""

import argparse
import os
import random
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

try:
    import torchvision
    from torchvision import transforms
except ImportError:  # the fallback below keeps the script usable without it
    torchvision = None

from PIL import Image

CLASSES = 10
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def write_images(root, n, size):
    """n images of size×size, every other one JPEG, the rest PNG: a class
    colour plus noise, so decoding does real work. Written to a temporary
    folder and renamed, so a run cut short never leaves half a data set."""
    done = os.path.join(root, f"done-{n}-{size}")
    if os.path.exists(done):
        return
    os.makedirs(root, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    for i in range(n):
        label = i % CLASSES
        base = torch.tensor([(label * 37) % 256, (label * 91) % 256, (label * 53) % 256])
        noise = torch.randint(0, 64, (size, size, 3), generator=g)
        pixels = ((base + noise) % 256).to(torch.uint8).numpy()
        ext = "jpg" if i % 2 == 0 else "png"
        path = os.path.join(root, f"{i:06d}_{label}.{ext}")
        tmp = path + ".tmp"
        Image.fromarray(pixels).save(tmp, format="JPEG" if ext == "jpg" else "PNG")
        os.replace(tmp, path)
    open(done, "w").close()


def list_images(root, n):
    names = sorted(f for f in os.listdir(root) if f.endswith((".jpg", ".png")))[:n]
    return [(os.path.join(root, f), int(f.split("_")[1].split(".")[0])) for f in names]


class ImageFiles(Dataset):
    """Image files read one by one from slow storage, decoded and augmented."""

    def __init__(self, items, crop, latency_s, train=True):
        self.items, self.latency_s = items, latency_s
        if torchvision is not None:
            aug = (
                [transforms.RandomResizedCrop(crop), transforms.RandomHorizontalFlip()]
                if train
                else [transforms.Resize(crop), transforms.CenterCrop(crop)]
            )
            self.transform = transforms.Compose(
                aug + [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
            )
        else:
            self.transform = lambda img: fallback_transform(img, crop, train)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        time.sleep(self.latency_s)  # the read from remote storage
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")  # decode
        return self.transform(img), label


def fallback_transform(img, crop, train):
    """Random crop and flip with PIL and tensor ops (torchvision absent)."""
    w, h = img.size
    s = random.randint(max(1, min(w, h) // 2), min(w, h)) if train else min(w, h)
    x0, y0 = random.randint(0, w - s), random.randint(0, h - s)
    img = img.crop((x0, y0, x0 + s, y0 + s)).resize((crop, crop))
    if train and random.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    t = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
    t = t.view(crop, crop, 3).permute(2, 0, 1).float() / 255
    return (t - torch.tensor(MEAN).view(3, 1, 1)) / torch.tensor(STD).view(3, 1, 1)


def build_model(name):
    """A torchvision model by name (random weights), or the small conv net:
    asked for (`--model small`, the CPU dry run), or when torchvision is missing."""
    if torchvision is not None and name != "small":
        return getattr(torchvision.models, name)(weights=None, num_classes=CLASSES), name
    net = nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, CLASSES),
    )
    return net, "small conv net" + (" (torchvision missing)" if torchvision is None else "")


def parse_args():
    ap = argparse.ArgumentParser(description="train an image classifier on files from slow storage")
    ap.add_argument("--data", default="images", help="folder of the (synthetic) images")
    ap.add_argument("--images", type=int, default=2048, help="training images")
    ap.add_argument("--size", type=int, default=160, help="side of the stored images")
    ap.add_argument("--crop", type=int, default=128, help="side the model sees")
    ap.add_argument("--latency-ms", type=float, default=3.0, help="storage latency per image")
    ap.add_argument(
        "--model",
        default="resnet18",
        help="a torchvision.models name, or `small` (a 2-layer conv net)",
    )
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    ap.add_argument("--lr", type=float, default=0.01)
    return ap.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n_val = max(args.batch_size, args.images // 8)
    write_images(args.data, args.images + n_val, args.size)
    items = list_images(args.data, args.images + n_val)
    latency = args.latency_ms / 1000
    train_loader = DataLoader(
        ImageFiles(items[: args.images], args.crop, latency),
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
    )
    val_loader = DataLoader(
        ImageFiles(items[args.images :], args.crop, latency, train=False),
        batch_size=args.batch_size,
    )
    model, name = build_model(args.model)
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    print(
        f"model: {name}, device: {device}, images: {args.images}, workers: {args.workers}",
        flush=True,
    )
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
        print(
            f"epoch {epoch}: loss {loss.item():.3f}, val acc {correct / n_val:.2f}, "
            f"{args.images / took:.0f} samples/sec",
            flush=True,
        )


if __name__ == "__main__":
    main()
