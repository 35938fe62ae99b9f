"""A Hugging Face Trainer script: a small GPT-2 built from its config (no download), a
dataset of token ids, TrainingArguments from the command line. wavecast traces it as
written; hf_trainer_providers.py is the same model and step with provider functions."""

import argparse

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


def small_gpt2():
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=1000, n_positions=128))


class Tokens(Dataset):
    def __init__(self, size, length, seed=0):
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 1000, (size, length), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, index):
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--output-dir", default="hf_out")
    args = parser.parse_args()
    training = TrainingArguments(
        output_dir=args.output_dir, per_device_train_batch_size=args.batch_size, learning_rate=3e-4,
        num_train_epochs=3, logging_steps=1, save_steps=1, report_to="tensorboard", bf16=True)
    trainer = Trainer(model=small_gpt2(), args=training, train_dataset=Tokens(16 * args.batch_size, args.seq_len))
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
