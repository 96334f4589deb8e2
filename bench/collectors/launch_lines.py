#!/usr/bin/env python3
"""What one cold launch, free or allocation through the shim runs and misses (callgrind).

Runs shim_launch_bench under `lockstep run --level broad` (or --level full) inside callgrind with simulated caches
(32 KiB L1s, 1 MiB last level), counting only its paced launches (the bench toggles collection
around each: the job's work between two has evicted the shim's lines): per launch, the
instructions (Ir), the instruction lines missed in L1 (I1mr) and the data lines missed on reads
and writes (D1mr, D1mw). A staging batch's first clear (a memset of a new batch, one per 128
launches) is left out. The figures do not move with the machine's load, so two builds of the
shim (--shim NAME=PATH, through LOCKSTEP_LIB) compare in one run of each where timings
(shim_launch_bench.py, the H200's LOCKSTEP_DEBUG runs) need many. They are a proxy: on the H200's
host a broad launch's time in a PyTorch job follows the lines it touches cold (docs/performance.md),
which this counts; it says nothing of the latency of each.

  bench/collectors/launch_lines.py --build build --shim base=/tmp/base/liblockstep.so \\
      --json results/overhead/<date>-<commit>-launch-lines-cpu.json
  bench/collectors/launch_lines.py --build build --max Ir=480,I1mr=45,D1mr=18,D1mw=16
  bench/collectors/launch_lines.py --build build --api runtime-stub   # PyTorch's entry point
  bench/collectors/launch_lines.py --build build --level full        # regions, a hash launch
  bench/collectors/launch_lines.py --build build --level full --params wide  # 96 words more
  bench/collectors/launch_lines.py --build build --level full --op free  # a cuMemFreeAsync
  bench/collectors/launch_lines.py --build build --level full --live 3000  # a job's allocations

At full every paced launch plans its regions and enqueues a merged hash launch (the stand-in
driver's hash engine, fake_hash_engine.h): full's costliest path. Callgrind runs one thread at a
time, so at full the bench pauses 2 ms before each counted launch (shim_launch_bench.cpp): the
collector, which hands retired records back for reuse, runs between two as beside a job's work
(without the pause each launch allocated its record: ~870 instructions more). With --op free the
counted call is instead the job's stream-ordered free (cuMemFreeAsync, as PyTorch's cudaMallocAsync
backend frees a tensor: the allocator full runs on) of 1 MiB that a launch just wrote, its outputs
waiting in the set of deferred hashes: the shim's free hook; with --op alloc that round's
cuMemAllocAsync (the allocation hook).

With --max (the CPU test launch_lines_within_budget), exit status 1 when this build's launch
exceeds a bound: a change that makes the broad launch's path longer or touch more lines fails a
test, which a timing could not do here.

Needs valgrind (Debian: valgrind). Not evidence of GPU work: a stand-in driver.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# bench/overhead/run_facts.py: commit, GPU, driver, date of every results JSON.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "overhead"))
import run_facts  # noqa: E402

EVENTS = ("Ir", "I1mr", "D1mr", "D1mw")


def counts(args, shim, work):
    """Per paced launch: {event: count}, the batch memset's left out."""
    bench = os.path.join(args.build, "bench", "collectors", "shim_launch_bench")
    out_file = os.path.join(work, "callgrind.out")
    trace = os.path.join(work, "trace")
    shutil.rmtree(trace, ignore_errors=True)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if shim:
        env["LOCKSTEP_LIB"] = shim
    cmd = [os.path.join(args.build, "tools", "lockstep"), "run", "-o", trace, "--level", args.level,
           "--", "valgrind", "--tool=callgrind", "--cache-sim=yes", "--collect-atstart=no",
           "--I1=32768,8,64", "--D1=32768,8,64", "--LL=1048576,16,64",
           f"--callgrind-out-file={out_file}", bench, str(args.launches), args.api, args.params,
           args.op, str(args.live)]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if run.returncode != 0 or not os.path.exists(out_file):
        sys.exit(f"launch_lines: the bench failed under callgrind (exit {run.returncode}): "
                 f"{run.stderr[-2000:]}")
    flat = subprocess.run(["callgrind_annotate", "--show=" + ",".join(EVENTS), out_file],
                          capture_output=True, text=True).stdout

    def numbers(line):
        line = re.sub(r"\(\s*[0-9.]+%\)", "", line)
        return [0 if x == "." else int(x.replace(",", "")) for x in line.split()[:len(EVENTS)]]

    total = next((numbers(l) for l in flat.splitlines() if "PROGRAM TOTALS" in l), None)
    if total is None or total[0] == 0:
        sys.exit("launch_lines: callgrind counted nothing: shim_launch_bench was built without "
                 "valgrind/callgrind.h (install valgrind, then rebuild it)")
    memset = next((numbers(l) for l in flat.splitlines()
                   if "memset" in l and re.match(r"\s*[0-9]", l)), [0] * len(EVENTS))
    paced = min(args.launches // 20, 20000) + 1  # shim_launch_bench's paced launches
    return {e: (t - m) / paced for e, t, m in zip(EVENTS, total, memset)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--build", default="build", help="build folder (default build)")
    p.add_argument("--launches", type=int, default=4000,
                   help="the bench's unpaced launches; a twentieth of them are paced (default 4000)")
    p.add_argument("--api", choices=("driver", "runtime-stub"), default="driver",
                   help="the launch entry point: driver (cuLaunchKernel: JAX, Triton) or "
                        "runtime-stub (__cudaLaunchKernel: PyTorch's own kernels); default driver")
    p.add_argument("--params", choices=("narrow", "wide"), default="narrow",
                   help="the kernel's parameters: narrow (an int, three pointers, four sizes) or "
                        "wide (96 more nonzero words that are no pointer, as an offset calculator "
                        "has; driver only); default narrow")
    p.add_argument("--op", choices=("launch", "free", "alloc"), default="launch",
                   help="the call counted: launch (the kernel launch, default), free (the "
                        "job's cuMemFreeAsync of memory a launch just wrote) or alloc (its "
                        "cuMemAllocAsync); free and alloc with --api driver")
    p.add_argument("--live", type=int, default=0, metavar="N",
                   help="N allocations made first and kept, as a job's tensors (the shim's "
                        "allocation map at a job's size; default 0)")
    p.add_argument("--level", choices=("broad", "full"), default="broad",
                   help="the level the launches are traced at (default broad)")
    p.add_argument("--shim", action="append", default=[], metavar="NAME=PATH",
                   help="another liblockstep.so, counted too (repeatable)")
    p.add_argument("--json", help="write the counts here")
    p.add_argument("--max", default="", metavar="EVENT=N,...",
                   help="bounds for this build's counts per launch (events: " + ", ".join(EVENTS) +
                        "): exit status 1 when one is exceeded")
    args = p.parse_args(argv)
    bounds = {}
    for item in filter(None, args.max.split(",")):
        event, _, value = item.partition("=")
        try:
            bounds[event] = float(value)
        except ValueError:
            p.error(f"--max {item!r}: expected EVENT=NUMBER")
        if event not in EVENTS:
            p.error(f"--max {item!r}: {event!r} is not one of {', '.join(EVENTS)}")
    if args.params == "wide" and args.api != "driver":
        p.error("--params wide needs --api driver")
    if args.op != "launch" and args.api != "driver":
        p.error(f"--op {args.op} needs --api driver")
    if args.live < 0:
        p.error("--live must be 0 or more")
    if args.launches < 20:
        p.error("--launches must be 20 or more (a twentieth are paced)")
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            p.error(f"{tool} not found (Debian: apt-get install valgrind)")
    shims = {"this build": None}
    for shim in args.shim:
        name, _, path = shim.partition("=")
        if not name or not path:
            p.error(f"--shim {shim!r}: expected NAME=PATH")
        if not os.path.isfile(path):
            p.error(f"--shim {shim!r}: {path}: no such file")
        shims[name] = os.path.abspath(path)
    rows = {}
    print(f"{'shim':<16}" + "".join(f"{e:>8}" for e in EVENTS) +
          f"   per cold {args.level} {args.op} "
          f"({args.api}, {args.params} parameters)")
    with tempfile.TemporaryDirectory(prefix="lockstep-launch-lines.") as work:
        for name, path in shims.items():
            rows[name] = counts(args, path, work)
            print(f"{name:<16}" + "".join(f"{rows[name][e]:>8.1f}" for e in EVENTS))
    # Fewer than a hook's instructions: the counted call went round the shim (a stand-in entry
    # point it does not hook), and any bound would pass.
    bypassed = [name for name, row in rows.items() if row["Ir"] < 50]
    if bypassed:
        sys.exit(f"launch_lines: under 50 instructions per counted {args.op} "
                 f"({', '.join(bypassed)}): the call did not go through the shim")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "launch_lines", **run_facts.facts(),
                       "machine": "CPU only (stand-in driver), callgrind's simulated caches",
                       "launches": args.launches, "api": args.api, "params": args.params,
                       "op": args.op, "live": args.live,
                       "level": args.level,
                       "shims": {k: v for k, v in shims.items() if v},
                       "per_launch": rows, "max": bounds}, f, indent=1)
    over = [f"{e} {rows['this build'][e]:.1f} > {bound:g}" for e, bound in bounds.items()
            if rows["this build"][e] > bound]
    if over:
        print("launch_lines: over budget: " + "; ".join(over))
        return 1
    if bounds:
        print("launch_lines: within " + ", ".join(f"{e} {b:g}" for e, b in bounds.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
