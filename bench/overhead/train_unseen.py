#!/usr/bin/env python3
"""A training job the examples do not contain, for bench/overhead/overhead.py --job unseen
(issue #34: full at most x1.5 on a GPT-like job lockstep was not tuned on). The model
(unseen_model.py) is built unlike examples/pytorch/gpt_model.py: RMSNorm, SwiGLU, rotary
embeddings, grouped-query attention through F.scaled_dot_product_attention, untied embeddings,
a vocabulary of 32000; bf16 autocast; Adafactor (torch.optim.Adafactor; SGD with Nesterov
momentum where the torch has none) with a cosine learning-rate schedule and gradient clipping.

  python3 bench/overhead/train_unseen.py --steps 20
  python3 bench/overhead/overhead.py --job unseen --levels broad,full

It speaks train_gpt.py's protocol toward overhead.py, through the same modules
(examples/pytorch): --steps, --seed, --out (losses and per-step wall times as JSON), --gate
(step_gate.py: turns of a few steps), step markers (step_markers.py: lockstep.step(n) at the start
of step n), gpt_model.set_deterministic and its synthetic batches, so that two traced runs are
bit-identical and lockstep's det checks hold. One line per step: "step N loss L loss_hex H".

The default size is the benchmark's. Estimated on one H200 (not yet measured):
  parameters: 12 layers x 6.29 M (q 768x768, k and v 768x256 each, out 768x768; SwiGLU
    3 x 768x2048) = 75.5 M, embedding and untied head 24.6 M each: 124.7 M.
  FLOPs per step (8 x 1024 = 8192 tokens): GEMMs 6 x 100.1 M x 8192 = 4.9 TFLOP, causal
    attention ~0.5 TFLOP (forward 12.9 GFLOP per layer, backward ~2.5 x that): ~5.5 TFLOP, at
    the 150-290 TFLOP/s train_gpt.py's gpu-bound job reaches, 19-37 ms; plus the fp32 logits
    (8192 x 32000 x 4 B = 1 GiB, ~5 GB of traffic through the loss: ~2 ms) and Adafactor, which
    reads two scalars per parameter back to the host (param and update RMS, .item(): ~220 small
    synchronous copies and ~700 launches per step, where train_gpt.py's AdamW makes no copy and
    a few dozen launches; a few ms with the GPU idle between them): about 30-50 ms per step.
  memory: fp32 weights and gradients 0.5 GB each, Adafactor's factored state under 1 MB,
    activations ~0.25 GB per layer (3 GB), logits and their gradient ~2.6 GB: under 8 GB of
    the H200's 141 GB.
Other sizes: --dim, --layers, --heads, --kv-heads, --hidden, --vocab, --batch, --seq.
"""

import os
import sys

# Must be in the environment before torch (and cuBLAS) initialise, as train_gpt.py sets them.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "examples", "pytorch"))
from step_gate import StepGate, add_gate_argument  # noqa: E402
from step_profile import StepProfile, add_profile_argument  # noqa: E402

OPTIMIZERS = ("auto", "adafactor", "sgd")


def config_problem(dim, heads, kv_heads):
    """What is wrong with these attention shapes, or None (plain Python: checked before torch is
    imported)."""
    if dim % heads:
        return f"--dim {dim} is not a multiple of --heads {heads}"
    if heads % kv_heads:
        return f"--heads {heads} is not a multiple of --kv-heads {kv_heads}"
    if (dim // heads) % 2:
        return f"head size {dim // heads} is odd (rotary embeddings rotate pairs)"
    return None


def lr_factor(step, steps, warmup):
    """The schedule's multiplier of --lr after `step` optimizer steps (LambdaLR's argument): a
    linear warm-up over `warmup` steps, then a cosine from 1 down to 0.1 at `steps`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--kv-heads", type=int, default=4, help="key/value heads (grouped-query)")
    p.add_argument("--hidden", type=int, default=2048, help="SwiGLU hidden width")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--kv-repeat", action="store_true",
                   help="repeat the key/value heads and call sdpa without enable_gqa (a "
                        "fallback, should the grouped call find no kernel)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="auto",
                   help="auto (default): torch.optim.Adafactor where the torch has it, else sgd "
                        "(momentum 0.9, Nesterov)")
    p.add_argument("--foreach", action=argparse.BooleanOptionalAction, default=True,
                   help="Adafactor's foreach implementation (default; --no-foreach: its "
                        "per-tensor loop)")
    p.add_argument("--lr", type=float,
                   help="base learning rate (default: 1e-2 for Adafactor, its cap on the "
                        "relative step; 0.1 for SGD)")
    p.add_argument("--warmup", type=int, default=5, help="linear warm-up steps of the schedule")
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clipped to this")
    p.add_argument("--markers", choices=["api", "nvtx", "none"], default="api",
                   help="how steps are marked for lockstep (examples/pytorch/step_markers.py)")
    p.add_argument("--out", help="write losses and step times as JSON to this file")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: only for the CPU smoke test of the model "
                        "(tests/gpu/e2e/test_unseen_job.py); timings mean nothing there")
    add_gate_argument(p)
    add_profile_argument(p)  # bench/overhead/profile_full.sh JOB=unseen
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be at least 1")
    for name in ("batch", "seq", "dim", "layers", "heads", "kv_heads", "hidden", "vocab",
                 "warmup"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.clip <= 0 or (args.lr is not None and args.lr <= 0):
        p.error("--clip and --lr must be positive")
    problem = config_problem(args.dim, args.heads, args.kv_heads)
    if problem:
        p.error(problem)
    return args


def float_hex(value):
    return struct.pack(">f", value).hex()


def make_optimizer(args, params, torch):
    """(optimizer, its name): Adafactor (PyTorch 2.5+) or SGD with Nesterov momentum."""
    choice = args.optimizer
    if choice == "auto":
        choice = "adafactor" if hasattr(torch.optim, "Adafactor") else "sgd"
    if choice == "adafactor":
        # Both implementations read each parameter's RMS and its update's RMS to the host
        # (.item()): two small synchronous copies per parameter per step. foreach (the default
        # here; Adafactor's own default is the per-tensor loop, to save memory) launches its
        # element-wise work once per group of tensors instead of once per tensor.
        lr = 1e-2 if args.lr is None else args.lr
        return (torch.optim.Adafactor(params, lr=lr, weight_decay=0.0, foreach=args.foreach),
                f"Adafactor (foreach {args.foreach})")
    lr = 0.1 if args.lr is None else args.lr
    return (torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True, weight_decay=1e-4),
            "SGD (Nesterov)")


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("train_unseen.py: PyTorch is not installed", file=sys.stderr)
        return 2
    if not hasattr(torch.nn, "RMSNorm"):
        print(f"train_unseen.py: PyTorch {torch.__version__} has no torch.nn.RMSNorm (needs 2.5 "
              "or later)", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("train_unseen.py: no CUDA device visible", file=sys.stderr)
        return 2
    if args.optimizer == "adafactor" and not hasattr(torch.optim, "Adafactor"):
        print(f"train_unseen.py: PyTorch {torch.__version__} has no torch.optim.Adafactor",
              file=sys.stderr)
        return 2

    import gpt_model  # examples/pytorch: set_deterministic, make_batches, loss_fn
    from step_markers import StepMarkers
    from unseen_model import UnseenConfig, UnseenLM

    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    gpt_model.set_deterministic(args.seed)
    cfg = UnseenConfig(vocab=args.vocab, seq=args.seq, dim=args.dim, layers=args.layers,
                       heads=args.heads, kv_heads=args.kv_heads, hidden=args.hidden,
                       kv_repeat=args.kv_repeat)
    model = UnseenLM(cfg).to(device)
    inputs, targets = gpt_model.make_batches(args.steps, args.batch, cfg.seq, cfg.vocab,
                                             args.seed + 1, device)
    params = list(model.parameters())
    optimizer, opt_name = make_optimizer(args, params, torch)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, args.steps, args.warmup))
    markers = StepMarkers(args.markers)
    gate = StepGate(args.gate)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"train_unseen.py: {where}, torch {torch.__version__}, "
          f"{sum(p.numel() for p in params)} parameters, {opt_name}, steps {args.steps}, "
          f"attention {'kv-repeat' if args.kv_repeat else 'enable_gqa'}, "
          f"markers {markers.description}", file=sys.stderr)

    losses, times = [], []
    profile = StepProfile(args.profile, args.steps)
    for step in range(1, args.steps + 1):
        gate.before_step()
        profile.before_step(step)
        started = time.perf_counter()
        markers.begin(step)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False):
            loss = gpt_model.loss_fn(model(inputs[step - 1]), targets[step - 1])
        loss.backward()
        # The total norm stays on the device (no .item()): clipping does not sync the stream.
        torch.nn.utils.clip_grad_norm_(params, args.clip)
        optimizer.step()
        schedule.step()
        value = loss.detach().float().item()  # the step's sync, as train_gpt.py's
        markers.end()
        times.append(time.perf_counter() - started)
        losses.append(value)
        print(f"step {step} loss {value:.6f} loss_hex {float_hex(value)}", flush=True)
        gate.after_step(step)
    profile.finish()

    if args.out:
        with open(args.out, "w") as f:
            json.dump({"losses": losses, "loss_hex": [float_hex(v) for v in losses],
                       "step_times_s": times, "optimizer": opt_name,
                       "config": {k: v for k, v in vars(args).items() if k != "out"}},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
