#!/usr/bin/env python3
"""A small job with one Triton kernel that adds with tl.atomic_add (issue #30's replay verdict).

Each step draws rows of random values (fixed seed per step), sums them into a few bins, and
updates a state from the bins; the step's "loss" is a checksum of the state's bits (the sum of
its float32 bit patterns as integers), so that a difference in any last bit shows in it. The bins are
summed deterministically (a sorted index_add_ under torch.use_deterministic_algorithms) except at
--plant-step, where the Triton kernel `bin_rows_atomic_add` (named so, not "scatter": the mechanism table would take a scatter for XLA's) adds every row into its bin with
tl.atomic_add: thousands of float additions per bin in the order the threads happen to run, so
the bins (and every loss after) differ from run to run in their low bits.

  python3 triton_atomic.py --steps 6 --plant-step 3

Prints "step N loss L loss_hex H" per step (L: the state's sum of squares; H: the checksum as
hex), as the other examples do, and marks each step for lockstep (step_markers.py).
"""

import argparse
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--plant-step", type=int, default=0,
                   help="the step whose bins the Triton atomic kernel sums (0: none)")
    p.add_argument("--rows", type=int, default=1 << 16)
    p.add_argument("--bins", type=int, default=8)
    p.add_argument("--markers", default="api", choices=["api", "nvtx", "none"])
    args = p.parse_args(argv)
    try:
        import torch
        import triton
        import triton.language as tl
    except ImportError as e:
        print(f"triton_atomic.py: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("triton_atomic.py: no CUDA device visible", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from step_markers import StepMarkers

    @triton.jit
    def bin_rows_atomic_add(x_ptr, idx_ptr, out_ptr, rows, COLS: tl.constexpr,
                            BLOCK_ROWS: tl.constexpr):
        r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
        c = tl.arange(0, COLS)
        inside = r < rows
        b = tl.load(idx_ptr + r, mask=inside, other=0)
        v = tl.load(x_ptr + r[:, None] * COLS + c[None, :], mask=inside[:, None], other=0.0)
        tl.atomic_add(out_ptr + b[:, None] * COLS + c[None, :], v, mask=inside[:, None])

    cols, block_rows = 64, 64
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    state = torch.zeros(args.bins, cols, device=device)
    markers = StepMarkers(args.markers)
    print(f"triton_atomic.py: {torch.cuda.get_device_name(device)}, torch {torch.__version__}, "
          f"triton {triton.__version__}, steps {args.steps}, plant step {args.plant_step}, "
          f"markers {markers.description}", file=sys.stderr)
    for step in range(1, args.steps + 1):
        markers.begin(step)
        g = torch.Generator(device=device).manual_seed(1000 + step)
        x = torch.randn(args.rows, cols, device=device, generator=g)
        idx = torch.randint(0, args.bins, (args.rows,), device=device, generator=g)
        bins = torch.zeros(args.bins, cols, device=device)
        if step == args.plant_step:
            grid = (triton.cdiv(args.rows, block_rows),)
            bin_rows_atomic_add[grid](x, idx, bins, args.rows, COLS=cols, BLOCK_ROWS=block_rows)
        else:
            bins.index_add_(0, idx, x)
        state = 0.5 * state + bins
        # The step's one small D2H copy: both numbers in one tensor.
        both = torch.stack([state.view(torch.int32).to(torch.int64).sum(),
                            state.double().square().sum().view(torch.int64)]).cpu()
        checksum, loss = int(both[0]), both[1:].view(torch.float64).item()
        markers.end()
        print(f"step {step} loss {loss:.9g} loss_hex {checksum & (2**64 - 1):016x}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
