#!/usr/bin/env python3
"""A job for the GPU suite (group e, "held hashes other stream"): deferred output hashes held
across `.item()` (LOCKSTEP_HOLD_ACROSS_SYNC, collectors/README.md) must still read the bytes the
op wrote when, after the synchronize, another stream overwrites them with no event between.

Each step multiplies a 256 MiB tensor (`y = x * step`, the op whose output digest the check
compares), reads its sum to the host (a copy and cudaStreamSynchronize: the set holding y's hash
is held across them), then zeroes y, on a side stream (`--mode other-stream`: ordered after the
multiply by the host's synchronize alone) or on the same stream (`--mode same-stream`). The shim
must make the side stream wait for y's hash; if it did not, the hash (~80 us of reading) would
race the zeroing and the multiply's output digest would differ from the same-stream run's.

  python3 held_hashes.py --mode other-stream [--steps 3] [--mib 256]
"""
import argparse

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["other-stream", "same-stream"], required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--mib", type=int, default=256)
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(args.mib * 2**20 // 4, device="cuda")
    side = torch.cuda.Stream()
    for step in range(1, args.steps + 1):
        y = x * float(step)
        total = y.sum().item()
        if args.mode == "other-stream":
            # No event from the current stream: the host's synchronize (in .item()) is the order.
            with torch.cuda.stream(side):
                y.zero_()
            side.synchronize()
        else:
            y.zero_()
        torch.cuda.synchronize()
        print(f"step {step} sum {total:.3f}", flush=True)


if __name__ == "__main__":
    main()
