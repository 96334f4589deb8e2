#!/usr/bin/env python3
"""Two-rank (or more) DDP version of train_gpt.py for lockstep, over NCCL.

  python3 -m torch.distributed.run --nproc-per-node 2 examples/pytorch/train_ddp.py --steps 10
  lockstep run -o /tmp/ddp1 -- python3 -m torch.distributed.run --nproc-per-node 2 \
      examples/pytorch/train_ddp.py --steps 10

Each rank trains on its own synthetic data (seed + rank); DDP all-reduces the gradients with a
communication hook that lets one rank perturb one gradient value before the all-reduce:

  --plant-kind grad --plant-rank R --plant-step S
      rank R adds --plant-delta to the first value of the first gradient bucket at step S. The
      hook adds a value on every rank at every step (0.0 when not planted), so a planted run
      and a clean run launch the same kernels: diff a planted run against a clean run.
  --plant-kind activation --plant-rank R --plant-step S --plant-layer L
      rank R runs train_gpt.py's nondeterministic index_add_ at step S, layer L: two planted
      runs differ from each other (diff two planted runs).
  --plant-kind replica --plant-rank R --plant-step S
      after every optimizer step every rank adds a value to the first parameter's first element
      in place (0.0, except --plant-delta on rank R at step S): the same kernel reading the
      same parameters on every replica and, on rank R, writing other bytes, as a faulty GPU
      would. `lockstep audit` of a --level full run names rank R and its GPU (one run suffices).

  --grouped
      after each step also issue grouped NCCL calls (a batched send/recv ring exchange and two
      all-reduces under the coalescing manager); their result is printed as "grouped".

Prints "rank R step N loss L loss_hex H" per step and rank. NCCL_NVLS_ENABLE=0 is kept set.
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
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--attention", choices=["sdpa", "explicit"], default="sdpa",
                   help="sdpa: fused causal attention (F.scaled_dot_product_attention, the "
                        "default); explicit: matmul, mask, fp32 softmax, matmul (every head's "
                        "scores written to memory)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--plant-kind", choices=["grad", "activation", "replica"], default="grad")
    p.add_argument("--plant-rank", type=int, default=-1, help="rank that plants (-1: none)")
    p.add_argument("--plant-step", type=int, default=0, help="1-based step of the plant")
    p.add_argument("--plant-layer", type=int, default=0)
    p.add_argument("--plant-delta", type=float, default=1e-2)
    p.add_argument("--grouped", action="store_true",
                   help="after each step, also issue grouped NCCL calls: a batched send/recv "
                        "ring exchange and two coalesced all-reduces")
    p.add_argument("--markers", choices=["api", "nvtx", "none"], default="api")
    p.add_argument("--nvtx", action="store_true", help="same as --markers nvtx")
    add_profile_argument(p, per_rank=True)
    add_gate_argument(p)
    p.add_argument("--out", help="JSON losses per rank: '{rank}' in the name is replaced, "
                                 "otherwise '.rank<R>' is appended")
    args = p.parse_args(argv)
    if args.nvtx:
        args.markers = "nvtx"
    if args.steps < 1:
        p.error("--steps must be at least 1")
    if args.plant_rank >= 0 and not 1 <= args.plant_step <= args.steps:
        p.error(f"--plant-rank needs --plant-step in 1..{args.steps}")
    if not 0 <= args.plant_layer < args.layers:
        p.error(f"--plant-layer {args.plant_layer} is outside layers 0..{args.layers - 1}")
    return args


def float_hex(value):
    return struct.pack(">f", value).hex()


class PlantState:
    """State of the DDP communication hook below: who perturbs what, and the current step."""

    def __init__(self, rank, world, plant_rank, plant_step, delta, enabled):
        self.rank, self.world = rank, world
        self.plant_rank, self.plant_step, self.delta = plant_rank, plant_step, delta
        self.enabled = enabled
        self.step = 0


def perturbing_allreduce(state, bucket):
    """DDP communication hook: average gradients with an all-reduce, after adding `delta` to
    the first value of bucket 0 on the planted rank at the planted step (0.0 everywhere else,
    so that every run launches the same kernels)."""
    import torch.distributed as dist
    buffer = bucket.buffer()
    if state.enabled and bucket.index() == 0:
        planted = state.rank == state.plant_rank and state.step == state.plant_step
        buffer[:1].add_(state.delta if planted else 0.0)
    buffer.div_(state.world)
    future = dist.all_reduce(buffer, async_op=True).get_future()
    return future.then(lambda fut: fut.value()[0])


def grouped_collectives(dist, torch, loss, rank, world, device):
    """Grouped NCCL calls as PyTorch issues them: batch_isend_irecv (ncclGroupStart, ncclSend,
    ncclRecv, ncclGroupEnd) and all-reduces under the coalescing manager. Deterministic; their
    results are returned so that they end up in the printed numbers."""
    send = torch.stack([loss.detach().float(), torch.full((), float(rank), device=device)])
    recv = torch.empty_like(send)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % world),
           dist.P2POp(dist.irecv, recv, (rank - 1 + world) % world)]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    a, b = recv.clone(), send * 2
    try:
        from torch.distributed.distributed_c10d import _coalescing_manager
        with _coalescing_manager(device=device, async_ops=True) as cm:
            dist.all_reduce(a)
            dist.all_reduce(b)
        cm.wait()
    except (ImportError, TypeError, AttributeError) as e:  # private API: fall back, say so
        if not getattr(grouped_collectives, "warned", False):
            print(f"train_ddp.py: no coalescing manager ({e}); plain all-reduces",
                  file=sys.stderr)
            grouped_collectives.warned = True
        dist.all_reduce(a)
        dist.all_reduce(b)
    return (a.sum() + b.sum()).float()


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
    except ImportError:
        print("train_ddp.py: PyTorch is not installed", file=sys.stderr)
        return 2
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        if var not in os.environ:
            print(f"train_ddp.py: {var} is not set: start with "
                  "python3 -m torch.distributed.run --nproc-per-node 2 ...", file=sys.stderr)
            return 2
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.device_count() <= local_rank:
        print(f"train_ddp.py: rank {rank} needs GPU {local_rank}, "
              f"{torch.cuda.device_count()} visible", file=sys.stderr)
        return 2
    if args.plant_rank >= world:
        print(f"train_ddp.py: --plant-rank {args.plant_rank} >= world size {world}",
              file=sys.stderr)
        return 2

    import gpt_model
    from step_markers import StepMarkers

    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    gpt_model.set_deterministic(args.seed)  # same initial weights on every rank
    cfg = gpt_model.GPTConfig(vocab=args.vocab, seq=args.seq, dim=args.dim, heads=args.heads,
                              layers=args.layers, attention=args.attention)
    model = gpt_model.GPT(cfg).to(device)
    plant = None
    if args.plant_kind == "activation" and args.plant_rank == rank:
        plant = gpt_model.NondeterministicPlant(cfg.dim, device, args.seed + 7)
        model.blocks[args.plant_layer].plant = plant
    ddp = DDP(model, device_ids=[local_rank])
    plant_state = PlantState(rank, world, args.plant_rank, args.plant_step, args.plant_delta,
                             enabled=args.plant_kind == "grad")
    ddp.register_comm_hook(plant_state, perturbing_allreduce)
    first_parameter = next(ddp.parameters())
    inputs, targets = gpt_model.make_batches(args.steps, args.batch, cfg.seq, cfg.vocab,
                                             args.seed + 1 + 1000 * rank, device)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=args.lr, weight_decay=0.1)
    markers = StepMarkers(args.markers)
    gate = StepGate(args.gate, rank)
    if rank == 0:
        print(f"train_ddp.py: world {world}, {torch.cuda.get_device_name(device)}, torch "
              f"{torch.__version__}, steps {args.steps}, plant {args.plant_kind} rank "
              f"{args.plant_rank} step {args.plant_step}, markers {markers.description}",
              file=sys.stderr)

    losses, times = [], []
    profile = StepProfile(args.profile, args.steps, rank)
    for step in range(1, args.steps + 1):
        gate.before_step()
        profile.before_step(step)
        started = time.perf_counter()
        markers.begin(step)
        plant_state.step = step
        if plant is not None:
            plant.active = step == args.plant_step
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss = gpt_model.loss_fn(ddp(inputs[step - 1]), targets[step - 1])
        loss.backward()
        optimizer.step()
        if args.plant_kind == "replica":
            planted = rank == args.plant_rank and step == args.plant_step
            with torch.no_grad():
                first_parameter.view(-1)[:1].add_(args.plant_delta if planted else 0.0)
        if args.grouped:
            extra = grouped_collectives(dist, torch, loss, rank, world, device)
            # One 8-byte device-to-host copy for both numbers.
            value, extra_value = torch.stack([loss.detach().float(), extra]).tolist()
        else:
            value, extra_value = loss.detach().float().item(), None
        markers.end()
        times.append(time.perf_counter() - started)
        losses.append(value)
        line = f"rank {rank} step {step} loss {value:.6f} loss_hex {float_hex(value)}"
        if extra_value is not None:
            line += f" grouped {extra_value:.6f} grouped_hex {float_hex(extra_value)}"
        # One write(2) per line: both ranks share torchrun's stdout, and a line split over two
        # writes can interleave with the other rank's.
        sys.stdout.flush()
        os.write(sys.stdout.fileno(), (line + "\n").encode())
        gate.after_step(step)

    profile.finish()
    if args.out:
        path = rank_path(args.out, rank)
        with open(path, "w") as f:
            json.dump({"rank": rank, "world": world, "losses": losses,
                       "loss_hex": [float_hex(v) for v in losses], "step_times_s": times},
                      f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
