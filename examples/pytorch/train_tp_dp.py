#!/usr/bin/env python3
"""Tensor- and data-parallel training for lockstep: TP x DP ranks over NCCL sub-communicators.

  python3 -m torch.distributed.run --nproc-per-node 8 examples/pytorch/train_tp_dp.py --tp 2
  lockstep run -o /tmp/tpdp -- python3 -m torch.distributed.run --nproc-per-node 8 \
      examples/pytorch/train_tp_dp.py --tp 2 --steps 6

Ranks r*TP .. r*TP+TP-1 form tensor-parallel group r; ranks with the same TP index form a
data-parallel group. Both come from torch.distributed.new_group (NCCL communicators split from
the world one). Each layer is a Megatron-style MLP block: a column-parallel linear (each TP rank
holds a slice of the hidden units), GELU, a row-parallel linear, and an all-reduce over the TP
group; the input's gradient is all-reduced over the TP group in backward. Under bf16 autocast
both TP all-reduces move bf16 tensors, as in a bf16 Megatron job. Every parameter's gradient is
a view of one contiguous fp32 buffer (Megatron's grad buffer; DDP's gradient_as_bucket_view),
averaged over the DP group with one all-reduce per step (--grad-sync per-param: one all-reduce
per parameter instead, 52 per step at 8 layers). Embedding, norms and head are replicated.
Every DP replica reads its own batches (seed + DP index).

  --plant-rank R --plant-step S [--plant-layer L] [--plant-delta D]
      global rank R adds D to the first value of layer L's row-parallel output at step S,
      before the TP all-reduce. Every rank fills and adds that (zero) tensor at every step
      otherwise, so a planted run and a clean run launch the same kernels: diff a planted run
      against a clean run. Expected: rank R's fill is the origin, its TP partners' all-reduce
      outputs receive it, and the DP all-reduces carry it to the other replicas.

Prints "rank R step N loss L loss_hex H" per step and rank (the loss is the same on every rank
of a TP group). NCCL_NVLS_ENABLE=0 is kept set.
"""

import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ["NCCL_NVLS_ENABLE"] = "0"  # required on the lent machines (NVLink multicast off)
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from step_gate import StepGate, add_gate_argument  # noqa: E402
from step_profile import StepProfile, add_profile_argument, rank_path  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel size (divides the world)")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=None,
                   help="MLP hidden units, divided by --tp (default: 4 x --dim)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--plant-rank", type=int, default=-1, help="global rank that plants (-1: none)")
    p.add_argument("--plant-step", type=int, default=0, help="1-based step of the plant")
    p.add_argument("--plant-layer", type=int, default=0)
    p.add_argument("--plant-delta", type=float, default=1e-2)
    p.add_argument("--grad-sync", choices=["bucket", "per-param"], default="bucket",
                   help="DP gradient all-reduce: bucket (default: one all-reduce of the grad "
                        "buffer per step) or per-param (one per parameter, no buffer)")
    p.add_argument("--markers", choices=["api", "nvtx", "none"], default="api")
    add_profile_argument(p, per_rank=True)
    add_gate_argument(p)
    p.add_argument("--out", help="JSON losses per rank: '{rank}' in the name is replaced, "
                                 "otherwise '.rank<R>' is appended")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be at least 1")
    if args.hidden is None:
        args.hidden = 4 * args.dim
    if args.tp < 1 or args.hidden % args.tp:
        p.error(f"--tp {args.tp} must be at least 1 and divide --hidden {args.hidden}")
    if args.plant_rank >= 0 and not 1 <= args.plant_step <= args.steps:
        p.error(f"--plant-rank needs --plant-step in 1..{args.steps}")
    if not 0 <= args.plant_layer < args.layers:
        p.error(f"--plant-layer {args.plant_layer} is outside layers 0..{args.layers - 1}")
    return args


def float_hex(value):
    return struct.pack(">f", value).hex()


def build(torch, dist, args, rank, world, device):
    """Process groups, model and optimizer. Returns (model, tp_group, dp_group, dp_size)."""
    import torch.nn as nn
    import torch.nn.functional as F

    tp = args.tp
    dp = world // tp
    # Every rank creates every group, in the same order (new_group is collective).
    tp_groups = [dist.new_group(list(range(i * tp, (i + 1) * tp))) for i in range(dp)]
    dp_groups = [dist.new_group(list(range(j, world, tp))) for j in range(tp)]
    tp_group, dp_group = tp_groups[rank // tp], dp_groups[rank % tp]
    tp_rank = rank % tp

    class CopyToTP(torch.autograd.Function):
        """Forward identity; backward all-reduce over the TP group (the input is replicated,
        each TP rank's slice contributes part of its gradient)."""

        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            grad = grad.contiguous()
            dist.all_reduce(grad, group=tp_group)
            return grad

    class ReduceFromTP(torch.autograd.Function):
        """Forward all-reduce over the TP group; backward identity."""

        @staticmethod
        def forward(ctx, y):
            y = y.contiguous()
            dist.all_reduce(y, group=tp_group)
            return y

        @staticmethod
        def backward(ctx, grad):
            return grad

    def shard(full, dim):
        return full.chunk(tp, dim=dim)[tp_rank].contiguous()

    class TPBlock(nn.Module):
        def __init__(self, g):
            super().__init__()
            self.norm = nn.LayerNorm(args.dim)
            # Full weights drawn from one generator on every rank, then sliced: the model is
            # the same whatever --tp is.
            up = torch.randn(args.hidden, args.dim, generator=g) / args.dim ** 0.5
            down = torch.randn(args.dim, args.hidden, generator=g) / args.hidden ** 0.5
            self.up_w = nn.Parameter(shard(up, 0))
            self.up_b = nn.Parameter(torch.zeros(args.hidden // tp))
            self.down_w = nn.Parameter(shard(down, 1))
            self.down_b = nn.Parameter(torch.zeros(args.dim))  # added once, after the reduce
            # bf16, the row-parallel output's dtype under autocast: the TP all-reduce stays bf16.
            self.register_buffer("plant", torch.zeros(args.dim, dtype=torch.bfloat16))

        def forward(self, x):
            # Cast before the copy, not inside the linear: its gradient's all-reduce is bf16.
            h = F.gelu(F.linear(CopyToTP.apply(self.norm(x).to(torch.bfloat16)), self.up_w,
                                self.up_b))
            y = F.linear(h, self.down_w)
            y = y + self.plant  # zero except on the planted rank and step
            return x + ReduceFromTP.apply(y) + self.down_b

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(args.seed)
            self.embed = nn.Embedding(args.vocab, args.dim)
            self.embed.weight.data.copy_(torch.randn(args.vocab, args.dim, generator=g) * 0.02)
            self.blocks = nn.ModuleList(TPBlock(g) for _ in range(args.layers))
            self.norm = nn.LayerNorm(args.dim)
            self.head = nn.Linear(args.dim, args.vocab, bias=False)
            self.head.weight.data.copy_(torch.randn(args.vocab, args.dim, generator=g) * 0.02)

        def forward(self, tokens):
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    model = Model().to(device)
    return model, tp_group, dp_group, dp


def attach_grad_buffer(torch, model):
    """One zeroed fp32 buffer holding every parameter's gradient as a view: backward accumulates
    in place into the views, so one all-reduce of the buffer averages every gradient."""
    params = list(model.parameters())
    buffer = torch.zeros(sum(p.numel() for p in params), dtype=torch.float32,
                         device=params[0].device)
    offset = 0
    for p in params:
        p.grad = buffer[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    return buffer


def grads_outside(model, buffer):
    """Names of the parameters whose .grad backward did not accumulate into BUFFER (a view
    replaced): the one all-reduce would skip their gradients. Host pointers only, no sync."""
    low = buffer.data_ptr()
    high = low + buffer.numel() * buffer.element_size()
    return [name for name, p in model.named_parameters()
            if p.grad is None or not low <= p.grad.data_ptr() < high]


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("train_tp_dp.py: PyTorch is not installed", file=sys.stderr)
        return 2
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        if var not in os.environ:
            print(f"train_tp_dp.py: {var} is not set: start with "
                  "python3 -m torch.distributed.run --nproc-per-node 8 ...", file=sys.stderr)
            return 2
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    if world % args.tp:
        print(f"train_tp_dp.py: --tp {args.tp} does not divide world size {world}",
              file=sys.stderr)
        return 2
    if torch.cuda.device_count() <= local_rank:
        print(f"train_tp_dp.py: rank {rank} needs GPU {local_rank}, "
              f"{torch.cuda.device_count()} visible", file=sys.stderr)
        return 2
    if args.plant_rank >= world:
        print(f"train_tp_dp.py: --plant-rank {args.plant_rank} >= world size {world}",
              file=sys.stderr)
        return 2

    import gpt_model
    from step_markers import StepMarkers

    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    gpt_model.set_deterministic(args.seed)
    model, tp_group, dp_group, dp = build(torch, dist, args, rank, world, device)
    dp_index = rank // args.tp
    inputs, targets = gpt_model.make_batches(args.steps, args.batch, args.seq, args.vocab,
                                             args.seed + 1 + 1000 * dp_index, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    grad_buffer = attach_grad_buffer(torch, model) if args.grad_sync == "bucket" else None
    markers = StepMarkers(args.markers)
    gate = StepGate(args.gate, rank)
    profile = StepProfile(args.profile, args.steps, rank)
    planted_block = model.blocks[args.plant_layer]
    if rank == 0:
        print(f"train_tp_dp.py: world {world} = TP {args.tp} x DP {dp}, "
              f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, steps "
              f"{args.steps}, plant rank {args.plant_rank} step {args.plant_step} layer "
              f"{args.plant_layer}, grad sync {args.grad_sync}, markers {markers.description}",
              file=sys.stderr)

    losses, times = [], []
    for step in range(1, args.steps + 1):
        gate.before_step()
        profile.before_step(step)
        started = time.perf_counter()
        markers.begin(step)
        # The same fill on every rank and step, with the delta only where planted: the fill
        # is then the origin on the planted rank, and both runs launch the same kernels.
        planted = rank == args.plant_rank and step == args.plant_step
        planted_block.plant[:1].fill_(args.plant_delta if planted else 0.0)
        if grad_buffer is None:
            optimizer.zero_grad(set_to_none=True)
        else:
            grad_buffer.zero_()  # the views stay the parameters' .grad
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss = gpt_model.loss_fn(model(inputs[step - 1]), targets[step - 1])
        loss.backward()
        if grad_buffer is None:
            for p in model.parameters():  # data parallel: average every gradient over DP
                dist.all_reduce(p.grad, group=dp_group)
                p.grad.div_(dp)
        else:
            outside = grads_outside(model, grad_buffer) if step == 1 else []
            if outside:
                print(f"train_tp_dp.py: rank {rank}: gradients outside the grad buffer after "
                      f"backward: {', '.join(outside[:3])}", file=sys.stderr)
                return 2
            dist.all_reduce(grad_buffer, group=dp_group)
            grad_buffer.div_(dp)
        optimizer.step()
        value = loss.detach().float().item()
        markers.end()
        times.append(time.perf_counter() - started)
        losses.append(value)
        line = f"rank {rank} step {step} loss {value:.6f} loss_hex {float_hex(value)}\n"
        sys.stdout.flush()
        os.write(sys.stdout.fileno(), line.encode())  # one write(2): ranks share stdout
        gate.after_step(step)

    profile.finish()
    if args.out:
        with open(rank_path(args.out, rank), "w") as f:
            json.dump({"rank": rank, "world": world, "tp": args.tp, "losses": losses,
                       "loss_hex": [float_hex(v) for v in losses], "step_times_s": times},
                      f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
