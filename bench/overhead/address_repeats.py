#!/usr/bin/env python3
"""How often a training step's ops pass the same device addresses as in the step before (issue #34):
what a cache of repeating launches' plans, keyed by a launch's parameter bytes, could hit.

A kernel launch at full decodes its parameter bytes and plans its regions (collectors/kernels.cpp,
general_launch_begin: about 2,000 of a cold launch's 5,500 instructions, launch_lines.py). A
launch whose kernel and parameter bytes repeat an earlier one's could replay that plan instead,
if its pointers still name the same allocations. Parameter bytes hold the tensors' addresses,
so the plan repeats only where the allocator hands out the same addresses step after step. Full
runs PyTorch on its cudaMallocAsync backend (exact regions, docs/performance.md), which may not.

This counts it without the shim: the unseen job (train_unseen.py) runs a few steps untraced under
a dispatch mode that notes every ATen op's tensors (storage address, offset, shape; view ops,
which launch nothing, left out), once per allocator, each in its own process (the backend is
chosen when CUDA initialises). Per step, against the step before: ops whose op and tensors are
the same at the same index, and anywhere in that step (what an unbounded cache could hit at
most). An ATen op stands for its launches (most launch one kernel; a few launch none or several):
a proxy for the launches' parameter bytes, which hold these addresses and the scalars.

  python3 bench/overhead/address_repeats.py --json results/overhead/<date>-<commit>-address-repeats.json
  python3 bench/overhead/address_repeats.py --steps 6 -- --layers 4   # the job's own arguments

Needs PyTorch and a GPU.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_facts  # noqa: E402

ALLOCATORS = {"caching": None, "cudaMallocAsync": "backend:cudaMallocAsync"}


def child(steps, job_args):
    """One allocator's run (this process chose it in its environment): a JSON line of per-step
    counts on stdout."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "pytorch"))
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    import step_markers
    import train_unseen

    per_step = []  # per step: [(op, tensors)]

    def tensors(value, out):
        if isinstance(value, torch.Tensor):
            if value.is_cuda:
                out.append((value.untyped_storage().data_ptr(), value.storage_offset(),
                            tuple(value.shape)))
        elif isinstance(value, (list, tuple)):
            for item in value:
                tensors(item, out)
        elif isinstance(value, dict):
            for item in value.values():
                tensors(item, out)

    class Note(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if per_step and not getattr(func, "is_view", False):
                seen = []
                tensors((args, kwargs or {}, result), seen)
                if seen:
                    per_step[-1].append((str(func), tuple(seen)))
            return result

    begin = step_markers.StepMarkers.begin

    def marked_begin(self, step):
        per_step.append([])
        return begin(self, step)

    step_markers.StepMarkers.begin = marked_begin
    with Note():
        rc = train_unseen.main(["--steps", str(steps), "--markers", "none"] + job_args)
    if rc != 0:
        return rc
    print("ADDRESS_REPEATS " + json.dumps(compare_steps(per_step)), flush=True)
    return 0


def compare_steps(per_step):
    """Per step from the second (numbered from 1), against the step before: its ops, those
    equal to the op at the same index there, and those equal to any op there (each op a hashable
    (name, tensors) pair)."""
    rows = []
    for step in range(1, len(per_step)):
        before, now = per_step[step - 1], per_step[step]
        earlier = set(before)
        rows.append({"step": step + 1, "ops": len(now),
                     "same_index": sum(1 for a, b in zip(before, now) if a == b),
                     "anywhere": sum(1 for b in now if b in earlier)})
    return rows


def share(rows, key, from_step=3):
    """The median over steps from `from_step` (the first steps still warm up: the allocator
    grows, cuBLAS picks) of the share of ops counted under `key`, in percent; None without such
    a step."""
    values = [100.0 * r[key] / r["ops"] for r in rows if r["step"] >= from_step and r["ops"]]
    return statistics.median(values) if values else None


def measure(allocator, steps, job_args, timeout):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if ALLOCATORS[allocator]:
        env["PYTORCH_CUDA_ALLOC_CONF"] = ALLOCATORS[allocator]
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(steps), "--"]
    run = subprocess.run(cmd + job_args, env=env, capture_output=True, text=True, timeout=timeout)
    line = next((l for l in run.stdout.splitlines() if l.startswith("ADDRESS_REPEATS ")), None)
    if run.returncode != 0 or line is None:
        sys.exit(f"address_repeats: the {allocator} run failed (exit {run.returncode}): "
                 f"{run.stderr.strip()[-1500:]}")
    return json.loads(line.split(" ", 1)[1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--steps", type=int, default=6,
                   help="steps run (default 6; each compared with the one before it from step 2)")
    p.add_argument("--timeout", type=int, default=300, help="seconds per allocator's run")
    p.add_argument("--json", help="write the counts and the run's facts here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("job_args", nargs="*", help="the job's own arguments, after --")
    args = p.parse_args(argv)
    if args.steps < 2:
        p.error("--steps must be at least 2 (a step is compared with the one before it)")
    if args.child:
        return child(args.steps, args.job_args)
    results = {}
    print(f"{'allocator':<16} {'step':>4} {'ops':>6} {'same at its index':>18} {'anywhere':>10}")
    for allocator in ALLOCATORS:
        rows = measure(allocator, args.steps, args.job_args, args.timeout)
        results[allocator] = rows
        for r in rows:
            print(f"{allocator:<16} {r['step']:>4} {r['ops']:>6} "
                  f"{r['same_index']:>8} ({100 * r['same_index'] / max(r['ops'], 1):5.1f}%) "
                  f"{r['anywhere']:>5} ({100 * r['anywhere'] / max(r['ops'], 1):5.1f}%)")
    shares = {a: {"same_index_pct": share(rows, "same_index"),
                  "anywhere_pct": share(rows, "anywhere")} for a, rows in results.items()}
    for allocator, s in shares.items():
        if s["anywhere_pct"] is not None:
            print(f"{allocator}: from step 3, median {s['same_index_pct']:.1f}% of ops at the same "
                  f"index, {s['anywhere_pct']:.1f}% anywhere in the step before")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "address_repeats", "job": "unseen", "steps": args.steps,
                       "job_args": args.job_args, "per_allocator": results, "shares": shares,
                       **run_facts.facts()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
