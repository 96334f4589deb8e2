#!/usr/bin/env python3
"""A kernel launch's CPU cost through the whole shim, without a GPU, side by side.

Runs shim_launch_bench (a stand-in driver whose entry points return at once) untraced and under
`lockstep run` at each level, interleaved round by round (the order rotates), optionally with
other builds of liblockstep.so (--shim NAME=PATH, through LOCKSTEP_LIB) as LEVEL@NAME. Each
traced run's trace is checked to hold every launch, so a shim that did not trace cannot pass
for a cheap one. Per mode: the median paced and unpaced ns per launch; the shim's own time is
the paced figure less the untraced run's of the same round; LEVEL@NAME is also compared with
LEVEL run by run (the median difference, its range, how many rounds it was lower).

  bench/collectors/shim_launch_bench.py --build build --rounds 8 \\
      --shim base=/tmp/base/build/interpose/liblockstep.so --levels broad --json out.json

Not evidence of GPU work and not the H200's figures: the CPU side of a launch on this machine.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

# bench/overhead/paired.py: the A/B statistics overhead.py judges with too.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "overhead"))
from paired import paired_difference, paired_text  # noqa: E402

LINE = re.compile(r"unpaced ([0-9.]+) ns, paced ([0-9.]+) ns \(median of (\d+)\)")
WARM_UP = 1000  # shim_launch_bench.cpp's launches before the timed ones


def launches_made(launches, paced):
    """Every launch one run of the bench makes: warm-up, unpaced, paced."""
    return WARM_UP + launches + paced


def run_once(args, mode, shims, work):
    bench = os.path.join(args.build, "bench", "collectors", "shim_launch_bench")
    level, _, shim = mode.partition("@")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if mode == "untraced":
        cmd = [bench, str(args.launches), args.api]
    else:
        trace = os.path.join(work, mode.replace("@", "-"))
        shutil.rmtree(trace, ignore_errors=True)
        if shim:
            env["LOCKSTEP_LIB"] = shims[shim]
        cmd = [os.path.join(args.build, "tools", "lockstep"), "run", "-o", trace, "--level", level,
               "--", bench, str(args.launches), args.api]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    m = LINE.search(out.stdout)
    if out.returncode != 0 or not m:
        sys.exit(f"{mode}: the bench failed (exit {out.returncode}): {out.stdout}{out.stderr}")
    unpaced, paced, paced_n = float(m.group(1)), float(m.group(2)), int(m.group(3))
    if level in ("broad", "full"):  # every launch must be in the trace: warm-up, unpaced, paced
        stats = subprocess.run([os.path.join(args.build, "tools", "lockstep"), "stats", trace],
                               capture_output=True, text=True)
        k = re.search(r"^\s+kernel\s+(\d+)\s*$", stats.stdout, re.M)
        want = launches_made(args.launches, paced_n)
        if not k or int(k.group(1)) != want:
            sys.exit(f"{mode}: the trace holds {k.group(1) if k else 'no'} kernel records, not "
                     f"{want}: this shim did not trace the launches\n{stats.stdout}{stats.stderr}")
    return unpaced, paced


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--build", default="build", help="build folder (default build)")
    p.add_argument("--launches", type=int, default=200000, help="unpaced launches per run")
    p.add_argument("--api", choices=("driver", "runtime-stub"), default="driver",
                   help="the launch entry point: driver (cuLaunchKernel) or runtime-stub "
                        "(__cudaLaunchKernel, PyTorch's own kernels); default driver")
    p.add_argument("--rounds", type=int, default=5, help="rounds of every mode (default 5)")
    p.add_argument("--levels", default="off,metrics,broad", help="comma list (default "
                   "off,metrics,broad)")
    p.add_argument("--shim", action="append", default=[], metavar="NAME=PATH",
                   help="another liblockstep.so: adds LEVEL@NAME for every level")
    p.add_argument("--json", help="write the runs and the summary here")
    args = p.parse_args(argv)
    if args.launches < 1 or args.rounds < 1:
        p.error("--launches and --rounds must be 1 or more")
    shims = {}
    for shim in args.shim:
        name, _, path = shim.partition("=")
        if not name or not path or "@" in name:
            p.error(f"--shim {shim!r}: expected NAME=PATH")
        if not os.path.isfile(path):
            p.error(f"--shim {shim!r}: {path}: no such file")
        shims[name] = os.path.abspath(path)
    levels = [lv for lv in args.levels.split(",") if lv]
    for lv in levels:
        if lv not in ("off", "metrics", "broad", "full"):
            p.error(f"--levels: {lv!r} is not off, metrics, broad or full")
    modes = ["untraced"] + levels + [f"{lv}@{name}" for name in shims for lv in levels]
    runs = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory(prefix="lockstep-shim-bench.") as work:
        for r in range(args.rounds):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            for mode in order:
                runs[mode].append(run_once(args, mode, shims, work))
    summary = {}
    base = [paced for _, paced in runs["untraced"]]
    print(f"{'mode':<16} {'unpaced ns':>10} {'paced ns':>9} {'own ns (paced - untraced)':>26}")
    for mode in modes:
        unpaced = statistics.median(u for u, _ in runs[mode])
        paced = statistics.median(pc for _, pc in runs[mode])
        own = [pc - b for (_, pc), b in zip(runs[mode], base)]
        row = {"unpaced_ns": unpaced, "paced_ns": paced, "own_ns": statistics.median(own)}
        text = f"{mode:<16} {unpaced:>10.1f} {paced:>9.1f} {row['own_ns']:>26.1f}"
        level, _, shim = mode.partition("@")
        if shim and level in runs:
            pair = paired_difference([pc for _, pc in runs[level]], [pc for _, pc in runs[mode]])
            row["paired_vs_" + level] = pair
            text += "   " + paired_text(level, mode, pair, "ns")
        summary[mode] = row
        print(text)
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                    if l.startswith("model name")), platform.processor())
        with open(args.json, "w") as f:
            json.dump({"bench": "shim_launch_bench", "commit": commit.stdout.strip(),
                       "machine": f"CPU only (stand-in driver): {cpu}, {os.cpu_count()} cores",
                       "gpu": None, "driver": None,
                       "date": datetime.datetime.now(datetime.timezone.utc).strftime(
                           "%Y-%m-%dT%H:%MZ"),
                       "launches": args.launches, "api": args.api, "rounds": args.rounds,
                       "shims": shims,
                       "runs": {m: [{"unpaced_ns": u, "paced_ns": pc} for u, pc in v]
                                for m, v in runs.items()},
                       "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
