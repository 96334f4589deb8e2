#!/usr/bin/env python3
"""GPT-style training job for lockstep: deterministic by construction, with a switch that
plants one nondeterministic op at a chosen step and layer.

  python3 examples/pytorch/train_gpt.py --steps 20
  lockstep run -o /tmp/run1 -- python3 examples/pytorch/train_gpt.py --steps 20

Prints one line per step: "step N loss L loss_hex H" (H = the float32 loss bytes, big-endian
hex), so two runs compare as bytes. Steps are numbered from 1; with --markers api (default)
lockstep_step_number(N) is called at the start of each step when the shim is preloaded, so the
trace's step N is the script's step N (set-up work falls in step 0) and carries the number N.

Checkpoints: --save-at K FILE saves the model, the optimizer, the RNG states and the next step's
number to FILE before step K runs; --resume-from FILE loads them and runs steps K..--steps, so
that `lockstep diff straight resumed` compares steps K.. of both (by the steps' numbers).
Under `lockstep check --resume-at K` the job gets LOCKSTEP_RESUME_AT=K and LOCKSTEP_CHECKPOINT:
it saves there when that file does not exist yet and resumes from it when it does.
"""

import os

# Must be in the environment before torch (and cuBLAS) initialise.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import argparse  # noqa: E402
import json  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from step_gate import StepGate, add_gate_argument  # noqa: E402
from step_profile import StepProfile, add_profile_argument  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
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
    p.add_argument("--compile", action="store_true", help="torch.compile the model (Triton)")
    p.add_argument("--compile-mode", default=None,
                   help="torch.compile mode, e.g. reduce-overhead (CUDA graphs inside compile)")
    p.add_argument("--cuda-graph", action="store_true",
                   help="capture the whole training step with torch.cuda.graph after warm-up")
    p.add_argument("--warmup", type=int, default=3,
                   help="eager steps before capture with --cuda-graph (they count as steps)")
    p.add_argument("--plant-step", type=int, default=0,
                   help="1-based step at which a nondeterministic op runs (0: never); with "
                        "--cuda-graph, the step whose capture takes it in (replayed from then on)")
    p.add_argument("--plant-layer", type=int, default=0, help="layer of the planted op")
    p.add_argument("--nondeterministic-algorithms", action="store_true",
                   help="leave torch.use_deterministic_algorithms off (the default of most "
                        "training scripts): with --compile, Inductor's embedding backward then "
                        "accumulates with atomics and the weights differ between runs from the "
                        "first step, while bf16 rounding keeps the loss equal for steps")
    p.add_argument("--markers", choices=["api", "nvtx", "none"], default="api",
                   help="how steps are marked for lockstep (default: lockstep_step() if found)")
    p.add_argument("--nvtx", action="store_true", help="same as --markers nvtx")
    p.add_argument("--out", help="write losses (and step times) as JSON to this file")
    p.add_argument("--save-at", nargs=2, metavar=("K", "FILE"),
                   help="save model, optimizer, RNG states and the step number to FILE before "
                        "step K (the run goes on to --steps)")
    p.add_argument("--resume-from", metavar="FILE",
                   help="load a --save-at checkpoint and run its step K..--steps")
    p.add_argument("--forget-optimizer", action="store_true",
                   help="with --resume-from: do not load the optimizer's state (a resume that "
                        "is not bit-exact, for lockstep's negative demonstration)")
    add_gate_argument(p)
    add_profile_argument(p)
    p.add_argument("--probe-plant", type=int, default=0, metavar="K",
                   help="run the planted op K times, print how many results differ, exit")
    args = p.parse_args(argv)
    if args.nvtx:
        args.markers = "nvtx"
    if args.steps < 1:
        p.error("--steps must be at least 1")
    if args.plant_step and not 1 <= args.plant_step <= args.steps:
        p.error(f"--plant-step {args.plant_step} is outside steps 1..{args.steps}")
    if not 0 <= args.plant_layer < args.layers:
        p.error(f"--plant-layer {args.plant_layer} is outside layers 0..{args.layers - 1}")
    if args.cuda_graph and args.plant_step and args.plant_step <= args.warmup:
        p.error(f"--plant-step with --cuda-graph must come after --warmup ({args.warmup}): the "
                "plant is captured into the graph, which then replays it at every later step")
    if args.cuda_graph and args.warmup >= args.steps:
        p.error(f"--cuda-graph needs --steps > --warmup ({args.warmup})")
    contract = resume_contract(args)
    # Under the contract the straight run saves: --forget-optimizer then applies to the resume.
    if args.forget_optimizer and not args.resume_from and not contract:
        p.error("--forget-optimizer needs --resume-from (or lockstep check --resume-at)")
    if args.save_at:
        try:
            args.save_at = (int(args.save_at[0]), args.save_at[1])
        except ValueError:
            p.error(f"--save-at: {args.save_at[0]!r} is not a step number")
        if not 1 <= args.save_at[0] <= args.steps:
            p.error(f"--save-at {args.save_at[0]} is outside steps 1..{args.steps}")
    if args.save_at and args.resume_from:
        p.error("--save-at and --resume-from: one run saves, another resumes")
    if (args.save_at or args.resume_from) and (args.cuda_graph or args.probe_plant):
        p.error("--save-at / --resume-from do not combine with --cuda-graph or --probe-plant")
    return args


def resume_contract(args):
    """`lockstep check --resume-at K` runs the job twice with LOCKSTEP_RESUME_AT=K and
    LOCKSTEP_CHECKPOINT=FILE: the first run finds no FILE and saves there before step K, the
    second finds it and resumes. Explicit --save-at / --resume-from win. True when the contract
    applies."""
    at, path = os.environ.get("LOCKSTEP_RESUME_AT"), os.environ.get("LOCKSTEP_CHECKPOINT")
    if args.save_at or args.resume_from or not at or not path:
        return False
    if os.path.exists(path):
        args.resume_from = path
    else:
        args.save_at = [at, path]
    return True


def save_checkpoint(path, step, model, optimizer, torch):
    """Everything the steps from `step` on depend on: weights, optimizer state, RNG states
    (the batches are made up front from the seed, so they need nothing)."""
    torch.save({"next_step": step, "model": model.state_dict(),
                "optimizer": optimizer.state_dict(), "cpu_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all()}, path + ".tmp")
    os.replace(path + ".tmp", path)  # a killed save never leaves a checkpoint to resume from


def load_checkpoint(path, model, optimizer, forget_optimizer, torch):
    # On the CPU first: load_state_dict puts each tensor where the model's live (the optimizer's
    # "step" counters stay on the CPU, as in the run that saved them; on the GPU, AdamW would
    # read them back with a small copy every step, which the straight run does not make).
    state = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(state["model"])
    if not forget_optimizer:
        optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["cpu_rng"])
    torch.cuda.set_rng_state_all(state["cuda_rng"])
    return state["next_step"]


def float_hex(value):
    return struct.pack(">f", value).hex()


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("train_gpt.py: PyTorch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("train_gpt.py: no CUDA device visible", file=sys.stderr)
        return 2

    import gpt_model
    from step_markers import StepMarkers

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    gpt_model.set_deterministic(args.seed, not args.nondeterministic_algorithms)
    cfg = gpt_model.GPTConfig(vocab=args.vocab, seq=args.seq, dim=args.dim, heads=args.heads,
                              layers=args.layers, attention=args.attention)

    if args.probe_plant:
        plant = gpt_model.NondeterministicPlant(cfg.dim, device, args.seed + 7)
        results = {plant.accumulate().cpu().numpy().tobytes() for _ in range(args.probe_plant)}
        print(f"probe-plant: {len(results)} distinct results of {args.probe_plant} runs")
        return 0

    model = gpt_model.GPT(cfg).to(device)
    plant = None
    if args.plant_step:
        plant = gpt_model.NondeterministicPlant(cfg.dim, device, args.seed + 7)
        model.blocks[args.plant_layer].plant = plant
    inputs, targets = gpt_model.make_batches(args.steps, args.batch, cfg.seq, cfg.vocab,
                                             args.seed + 1, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1,
                                  capturable=args.cuda_graph)
    forward = torch.compile(model, mode=args.compile_mode) if args.compile else model
    markers = StepMarkers(args.markers)
    gate = StepGate(args.gate)
    print(f"train_gpt.py: {torch.cuda.get_device_name(device)}, torch {torch.__version__}, "
          f"{sum(p.numel() for p in model.parameters())} parameters, steps {args.steps}, "
          f"compile {args.compile}, cuda-graph {args.cuda_graph}, plant step "
          f"{args.plant_step or '-'} layer {args.plant_layer if args.plant_step else '-'}, "
          f"markers {markers.description}", file=sys.stderr)

    def train_step(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss = gpt_model.loss_fn(forward(x), y)
        loss.backward()
        optimizer.step()
        return loss

    losses, times = [], []
    first_step = 1
    if args.resume_from:
        first_step = load_checkpoint(args.resume_from, model, optimizer, args.forget_optimizer,
                                     torch)
        print(f"train_gpt.py: resumed from {args.resume_from} at step {first_step}"
              f"{' without the optimizer state' if args.forget_optimizer else ''}",
              file=sys.stderr)

    def finish_step(step, loss_tensor, started):
        loss = loss_tensor.detach().float().item()  # the step's one small D2H copy
        markers.end()
        times.append(time.perf_counter() - started)
        losses.append(loss)
        print(f"step {step} loss {loss:.6f} loss_hex {float_hex(loss)}", flush=True)

    graph = static_x = static_y = static_loss = None
    side = torch.cuda.Stream() if args.cuda_graph else None
    profile = StepProfile(args.profile, args.steps)
    for step in range(first_step, args.steps + 1):
        if args.save_at and step == args.save_at[0]:
            # Before the step's marker: the save's copies fall in the previous step.
            save_checkpoint(args.save_at[1], step, model, optimizer, torch)
        gate.before_step()
        profile.before_step(step)
        started = time.perf_counter()
        markers.begin(step)
        x, y = inputs[step - 1], targets[step - 1]
        if not args.cuda_graph:
            optimizer.zero_grad(set_to_none=True)
            if plant is not None:
                plant.active = step == args.plant_step
            finish_step(step, train_step(x, y), started)
        elif step <= args.warmup:
            # Warm-up on a side stream, as torch.cuda.graph requires.
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                optimizer.zero_grad(set_to_none=True)
                loss = train_step(x, y)
            torch.cuda.current_stream().wait_stream(side)
            finish_step(step, loss, started)
        else:
            if plant is not None:
                # Captured into the graph at --plant-step; replayed at every step after.
                plant.active = step == args.plant_step
            if graph is None or (plant is not None and step == args.plant_step):
                static_x, static_y = x.clone(), y.clone()
                optimizer.zero_grad(set_to_none=True)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    static_loss = train_step(static_x, static_y)
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()
            finish_step(step, static_loss, started)
        gate.after_step(step)

    profile.finish()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"losses": losses, "loss_hex": [float_hex(v) for v in losses],
                       "step_times_s": times,
                       "config": {k: v for k, v in vars(args).items() if k != "out"}},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
