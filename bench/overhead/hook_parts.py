"""The PyTorch state hook's cost by part (issue #34): what the Python that lockstep runs after each
optimizer step spends, piece by piece, on the launch-bound GPT job's model (77 parameters).

Run it under the shim, so that the state call is the real one:

  lockstep run --level broad -- python3 bench/overhead/hook_parts.py --json out.json

Each part is timed over --reps calls in --rounds rounds; the median round's mean per call is
printed. "whole hook" is StateHook.record, the Python hook's step; "steady step (C)" is what
torch calls after optimizer.step() where lockstep._state_hook is built (python/src/state_hook.cpp:
the same step, the shim called directly; absent without it); "state call" is the ctypes call
into lockstep_fingerprint_many with the shim's work in it (the shim's own share is
LOCKSTEP_DEBUG's "state" phase). The parts overlap the whole; their sum need not equal it.
"""

import argparse
import json
import operator
import os
import statistics
import sys
import time
from itertools import chain

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))
# The lockstep package `lockstep run` put on PYTHONPATH (a build's staged one, with its
# lockstep._state_hook), before the sources' (without it).
sys.path.append(os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_facts  # noqa: E402


def timed(fn, reps, rounds):
    """ns a call: the mean of `reps` calls of fn, in the median of `rounds` rounds (scope_parts.py
    times its pieces with it too)."""
    means = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(reps):
            fn()
        means.append((time.perf_counter_ns() - start) / reps)
    return statistics.median(means)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dim", type=int, default=512, help="model width (default: launch-bound's)")
    p.add_argument("--layers", type=int, default=6, help="blocks (default: launch-bound's)")
    p.add_argument("--reps", type=int, default=500, help="calls per round (default 500)")
    p.add_argument("--rounds", type=int, default=7, help="rounds; the median is kept (default 7)")
    p.add_argument("--json", help="write the figures here, with run_facts' commit, GPU, driver, date")
    args = p.parse_args()

    try:
        import torch
    except ImportError as error:
        print(f"hook_parts.py: needs PyTorch with CUDA ({error})", file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        print("hook_parts.py: needs a CUDA GPU (torch.cuda.is_available() is False)",
              file=sys.stderr)
        sys.exit(2)
    from gpt_model import GPT, GPTConfig
    from lockstep import _shim, _torch_hooks

    model = GPT(GPTConfig(dim=args.dim, layers=args.layers, seq=256)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = torch.randint(0, 1024, (4, 256), device="cuda")
    model(idx).float().sum().backward()
    opt.step()
    torch.cuda.synchronize()

    hook = _torch_hooks.StateHook(torch, {"params"})
    hook(opt, (), {})  # the first call: names walked, calls prepared (and primed for C)
    state = hook.states[opt]
    params = state.params
    data_ptr = _torch_hooks._data_ptr
    hook_pointer = state.pointer
    batch, current_stream = state.batches["params"][1][0]
    device = batch.device

    parts = {
        "whole hook": lambda: hook.record(opt),
        "capturing (as the hook reads it)": hook.capturing,
        "is_current_stream_capturing()": torch.cuda.is_current_stream_capturing,
        "params tuple (as the hook reads it)":
            lambda: tuple(chain.from_iterable(map(_torch_hooks._params_of, opt.param_groups))),
        "params tuple (a generator)":
            lambda: tuple(chain.from_iterable(g["params"] for g in opt.param_groups)),
        "params same (is)": lambda: all(map(operator.is_, params, state.params)),
        "pointers (as the hook reads them)": lambda: tuple(map(hook_pointer, params)),
        "pointers (t.data_ptr() each)": lambda: tuple(map(data_ptr, params)),
        "current stream (as the hook reads it)": current_stream,
        "current_stream(device).cuda_stream": lambda: torch.cuda.current_stream(device).cuda_stream,
        "state call (ctypes + shim)": batch.send,
    }
    if hook.steady is not None:
        parts["steady step (C)"] = lambda: hook.steady(opt, (), {})
    figures = {}
    for name, fn in parts.items():
        fn()
        figures[name] = timed(fn, args.reps, args.rounds)
    torch.cuda.synchronize()
    out = {"parameters": len(params), "traced": _shim.traced(), "reps": args.reps,
           "rounds": args.rounds, "ns_per_call": figures, **run_facts.facts()}
    print(f"state hook by part, {len(params)} parameters, traced={out['traced']} "
          f"(median of {args.rounds} rounds of {args.reps} calls):")
    for name, ns in figures.items():
        print(f"  {name:38s} {ns / 1000:9.2f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
