#!/usr/bin/env python3
"""A tiny Hugging Face `Trainer` job for lockstep: GPT-2 built from a config (no download, no
tokenizer), random token data, `full_determinism=True`, bf16. Nothing in it knows lockstep:
`lockstep run -- python3 examples/hf/train_hf.py` traces it as it is.

  python3 examples/hf/train_hf.py --steps 8
  lockstep run -o /tmp/hf1 --level full -- python3 examples/hf/train_hf.py --steps 8

Prints one line per optimizer step: "step N loss L loss_hex H" (H = the float32 loss bytes,
big-endian hex), so two runs compare as bytes. The loss is read from the step's own return
value (Trainer's logs round it to 4 digits).
"""

import argparse
import struct
import sys
import tempfile


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dim", type=int, default=128)
    return p.parse_args(argv)


def float_hex(value):
    return struct.pack(">f", value).hex()


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
    except ImportError as error:
        print(f"train_hf.py: needs torch and transformers ({error})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("train_hf.py: no CUDA device visible", file=sys.stderr)
        return 2

    class RandomTokens(torch.utils.data.Dataset):
        """Token sequences from a seeded generator: the same in every run."""

        def __init__(self, n):
            g = torch.Generator().manual_seed(args.seed)
            self.ids = torch.randint(0, args.vocab, (n, args.seq), generator=g)

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    class PrintingTrainer(Trainer):
        """Trainer, printing each step's loss as it came out of training_step."""

        step = 0

        def training_step(self, *a, **kw):
            loss = super().training_step(*a, **kw)
            PrintingTrainer.step += 1
            value = float(loss)
            print(f"step {PrintingTrainer.step} loss {value:.6f} loss_hex {float_hex(value)}",
                  flush=True)
            return loss

    config = GPT2Config(vocab_size=args.vocab, n_positions=args.seq, n_embd=args.dim,
                        n_layer=args.layers, n_head=4)
    with tempfile.TemporaryDirectory() as out:
        training = TrainingArguments(
            output_dir=out, max_steps=args.steps, per_device_train_batch_size=args.batch,
            learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to="none",
            full_determinism=True, seed=args.seed, bf16=True, dataloader_num_workers=0,
            disable_tqdm=True)
        # Trainer seeds every generator before the model is made only through model_init.
        trainer = PrintingTrainer(model_init=lambda: GPT2LMHeadModel(config), args=training,
                                  train_dataset=RandomTokens(args.batch * args.steps))
        print(f"train_hf.py: {torch.cuda.get_device_name()}, torch {torch.__version__}",
              flush=True)
        trainer.train()
    return 0


if __name__ == "__main__":
    sys.exit(main())
