"""A PyTorch Lightning script: a LightningDataModule whose items wait on
(simulated) remote storage, a small model, Trainer.fit with validation.
Lightning writes its logs to lightning_logs/ while it runs, and trains on the
GPU when there is one (accelerator="auto"), else on the CPU.

    tuneloop init -- python train.py
    tuneloop start --agent builtin
"""
import time

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset


class Shards(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.002)  # storage latency
        g = torch.Generator().manual_seed(i)
        return torch.randn(32, generator=g), i % 4


class Data(pl.LightningDataModule):
    def __init__(self, batch_size=16):
        super().__init__()
        self.batch_size = batch_size

    def train_dataloader(self):
        return DataLoader(Shards(1024), batch_size=self.batch_size, shuffle=True, num_workers=0)

    def val_dataloader(self):
        return DataLoader(Shards(64), batch_size=self.batch_size)


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, 4))

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    pl.seed_everything(0)
    trainer = pl.Trainer(max_epochs=3, accelerator="auto", devices=1,
                         enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Model(), datamodule=Data())
