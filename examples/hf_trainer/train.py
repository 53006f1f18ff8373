"""A plain Hugging Face Trainer script: a tiny BERT built from a config (no
download), a dataset whose items wait on storage. The Trainer picks the
device: the GPU when there is one, else the CPU (where `use_cpu` also leaves
the loader unpinned, as pinning needs an accelerator)."""
import argparse
import time

import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Reviews(Dataset):
    def __init__(self, n, seq=16):
        self.n, self.seq = n, seq

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.01)  # the item comes from remote storage
        ids = (torch.arange(self.seq) * (i + 1)) % 100
        return {"input_ids": ids, "attention_mask": torch.ones(self.seq, dtype=torch.long),
                "labels": torch.tensor(i % 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=float, default=1)
    args = ap.parse_args()
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    model = BertForSequenceClassification(config)
    training_args = TrainingArguments(
        output_dir="out",
        per_device_train_batch_size=16,
        num_train_epochs=args.epochs,
        dataloader_num_workers=0,
        logging_steps=50,
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=Reviews(1024),
                      eval_dataset=Reviews(64))
    trainer.train()


if __name__ == "__main__":
    main()
