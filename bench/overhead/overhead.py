#!/usr/bin/env python3
"""lockstep's overhead on a real PyTorch training job.

Runs examples/pytorch/train_gpt.py (or the DDP version) untraced and under `lockstep run` at
each level, interleaved round by round so that drift in the machine hits every mode alike. Each
run reports its per-step wall times (the job syncs once per step on loss.item()); the first
--skip steps of every run are dropped (warm-up, cuBLAS heuristics, allocator growth). Prints one
table: median step time per mode, ratio to untraced, the issue's target, and trace bytes per
step per rank.

  python3 bench/overhead/overhead.py --lockstep build/tools/lockstep
  python3 bench/overhead/overhead.py --job ddp --nproc 2 --levels broad
  # Two builds of the shim on one machine, interleaved (an A/B of a change to the hot path):
  python3 bench/overhead/overhead.py --size launch-bound --levels broad,broad@new \
      --shim new=/tmp/new/liblockstep.so --self-time --self-time-runs 3
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TARGETS = {"off": 1.005, "metrics": 1.01, "broad": 1.02, "full": 1.5}  # ratio to untraced
LEVELS = ("off", "metrics", "broad", "full")
# Extra modes: full level with another PyTorch allocator choice (`lockstep run --torch-alloc`;
# plain `full` is the default, auto = cudaMallocAsync), and the untraced job on cudaMallocAsync,
# to separate the allocator's own cost from lockstep's. Name -> (level, --torch-alloc, env).
EXTRA_MODES = {
    "full-caching": ("full", "keep", {}),
    "full-nocache": ("full", "none", {}),
    "untraced-async": (None, None, {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}),
    # Diagnostics, to split full's cost: a hash launch per kernel side instead of merged, and
    # every pointer region capped to 64 bytes (the same launches, almost no bytes to read).
    "full-unmerged": ("full", None, {"LOCKSTEP_MERGE_HASHES": "0"}),
    "full-64B": ("full", None, {"LOCKSTEP_MAX_REGION": "64"}),
    # Every input hashed again (no reused digests): what reuse saves.
    "full-noreuse": ("full", None, {"LOCKSTEP_REUSE_DIGESTS": "0"}),
    # Inputs in allocations nothing wrote yet not hashed (opt-in: see collectors/README.md).
    "full-skip": ("full", None, {"LOCKSTEP_SKIP_UNWRITTEN": "1"}),
    # Output hashes merged into the next call's launch only (no chained sets).
    "full-adjacent": ("full", None, {"LOCKSTEP_MERGE_HASHES": "adjacent"}),
    # Every kernel output hashed (no learned read-only pointers): what learning saves.
    "full-nolearn": ("full", None, {"LOCKSTEP_LEARN_READONLY": "0"}),
    # Every fill's output hashed (no recalled fill digests): what recalling saves.
    "full-norecall": ("full", None, {"LOCKSTEP_RECALL_FILLS": "0"}),
}
TARGETS.update({"full-caching": 1.5})  # full-nocache: no target (PyTorch without caching)
# Job sizes (examples/pytorch/train_gpt.py arguments). Measured on one H200: gpu-bound ~35 ms per
# step with fused attention (~46 ms written out, three untraced runs within 0.5%); launch-bound
# 15-36 ms per step, the SM clock going between 345 and 1980 MHz during a run. gpu-bound-explicit is
# gpu-bound with attention written out (every head's 512x512 scores in fp32 written to memory):
# the job lockstep's full level was first measured on, kept as the memory-bound worst case.
SIZES = {
    "gpu-bound": ["--dim", "1024", "--layers", "8", "--batch", "32", "--seq", "512"],
    "launch-bound": ["--dim", "512", "--layers", "6", "--batch", "16", "--seq", "256"],
}
SIZES["gpu-bound-explicit"] = SIZES["gpu-bound"] + ["--attention", "explicit"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lockstep", default=os.path.join(REPO, "build", "tools", "lockstep"),
                   help="the lockstep CLI (default: build/tools/lockstep)")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--job", choices=["gpt", "ddp", "tpdp"], default="gpt")
    p.add_argument("--nproc", type=int, default=2, help="processes for --job ddp or tpdp")
    p.add_argument("--levels", default=",".join(LEVELS),
                   help="comma-separated modes to measure: lockstep levels, or full-caching, "
                        "full-nocache, untraced-async (untraced always runs)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-rounds", type=int,
                   help="after --rounds, more rounds (up to this many in all) while some mode's "
                        "runs spread by more than --spread: one slow run of two or three moves "
                        "a pooled median; the rule looks at the runs' spread, never at the "
                        "ratios (default: --rounds, no extra rounds)")
    p.add_argument("--spread", type=float, default=0.05,
                   help="the spread of a mode's run medians (slowest / fastest - 1) that asks "
                        "for another round under --max-rounds (default 0.05)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--skip", type=int, default=5, help="steps dropped at the start of each run")
    p.add_argument("--timeout", type=float, default=180, help="seconds per run")
    p.add_argument("--work", help="directory for traces and per-run files (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the traces")
    p.add_argument("--json", help="write the results as JSON here")
    p.add_argument("--log", help="append every run's output here")
    p.add_argument("--self-time", action="store_true",
                   help="after the timed rounds, run each traced mode once more with "
                        "LOCKSTEP_DEBUG=1 and print the shim's own time per step (steady "
                        "state, the job's threads) against the untraced step: the overhead of "
                        "the small levels without the run-to-run noise")
    p.add_argument("--self-time-runs", type=int, default=1,
                   help="LOCKSTEP_DEBUG runs of each traced mode for --self-time, interleaved "
                        "(default 1); the median is reported, and each run's figure")
    p.add_argument("--shim", action="append", default=[], metavar="NAME=PATH",
                   help="another liblockstep.so (run through LOCKSTEP_LIB): adds a mode "
                        "LEVEL@NAME for every level, measured like the others, e.g. --shim "
                        "new=/tmp/new/liblockstep.so --levels broad,broad@new (repeatable)")
    p.add_argument("--cpus", default="gpu-local",
                   help="CPUs every run is pinned to: gpu-local (default for --job gpt: the "
                        "CPUs on the NUMA node of the first visible GPU, so that no run pays "
                        "for launches across sockets), all (no pinning; the default for "
                        "multi-rank jobs), or a list such as 0-15,32-47")
    p.add_argument("--size", choices=sorted(SIZES), default="gpu-bound",
                   help="the job's model size: gpu-bound (default: the GPU is busy all step, as "
                        "in production training; its clocks stay up, identical runs agree "
                        "within about 1%%) or launch-bound (a small model whose step is the "
                        "CPU launching ~1000 kernels: the worst case for a tracer's CPU cost, "
                        "but the GPU idles between kernels and its clock changes make identical "
                        "runs differ by 20%% or more; judge it by --self-time), or "
                        "gpu-bound-explicit (gpu-bound with attention written out instead of "
                        "fused: memory-bound, the most bytes per step for full to hash)")
    p.add_argument("job_args", nargs="*",
                   help="extra arguments for the job, after --  (replace --size's)")
    args = p.parse_args(argv)
    for shim in args.shim:
        name, _, path = shim.partition("=")
        if not name or not path or "@" in name or "," in name:
            p.error(f"--shim {shim!r}: expected NAME=PATH")
        if not os.path.isfile(path):
            p.error(f"--shim {shim!r}: {path}: no such file")
        for lv in LEVELS:
            EXTRA_MODES[f"{lv}@{name}"] = (lv, None, {"LOCKSTEP_LIB": os.path.abspath(path)})
            if lv in TARGETS:
                TARGETS[f"{lv}@{name}"] = TARGETS[lv]
    if args.self_time_runs < 1:
        p.error("--self-time-runs must be 1 or more")
    args.levels = [lv for lv in args.levels.split(",") if lv]
    for lv in args.levels:
        if lv not in LEVELS and lv not in EXTRA_MODES:
            p.error(f"unknown mode {lv!r} (one of {', '.join(LEVELS + tuple(EXTRA_MODES))})")
    if args.skip >= args.steps:
        p.error("--skip must be smaller than --steps")
    if args.max_rounds is None:
        args.max_rounds = args.rounds
    if args.rounds < 1 or args.max_rounds < args.rounds:
        p.error("--rounds must be 1 or more and --max-rounds no fewer than --rounds")
    return args


def widest_spread(run_medians):
    """The largest slowest/fastest - 1 among the modes' run medians (0 with fewer than 2 runs)."""
    spreads = [max(v) / min(v) - 1 for v in run_medians.values() if len(v) > 1 and min(v) > 0]
    return max(spreads, default=0.0)


def job_command(args, out_json):
    extra = args.job_args or SIZES[args.size]
    common = ["--steps", str(args.steps), "--out", out_json] + extra
    if args.job == "gpt":
        return [args.python, os.path.join(REPO, "examples", "pytorch", "train_gpt.py")] + common
    script = "train_ddp.py" if args.job == "ddp" else "train_tp_dp.py"
    return [args.python, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={args.nproc}",
            os.path.join(REPO, "examples", "pytorch", script)] + common


def parse_cpulist(text):
    """'0-3,8' -> {0, 1, 2, 3, 8}."""
    cpus = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def gpu_local_cpus():
    """The CPUs sysfs lists as local to the first visible GPU, or None when unknown."""
    index = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
    try:
        bus = subprocess.run(["nvidia-smi", "-i", index, "--query-gpu=pci.bus_id",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30).stdout.strip().splitlines()[0]
        # "00000000:19:00.0" -> sysfs spells the domain with 4 digits, in lower case.
        domain, rest = bus.split(":", 1)
        path = f"/sys/bus/pci/devices/{domain[-4:]}:{rest}".lower() + "/local_cpulist"
        with open(path) as f:
            cpus = parse_cpulist(f.read()) & os.sched_getaffinity(0)
        return cpus or None
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return None


def pinning(args):
    """The CPU set runs are pinned to (None: no pinning) and a phrase that says so."""
    choice = args.cpus
    if choice == "gpu-local" and args.job != "gpt":
        choice = "all"  # ranks on several GPUs: one node's CPUs would be remote for some
    if choice == "all":
        return None, "not pinned"
    if choice == "gpu-local":
        cpus = gpu_local_cpus()
        if cpus is None:
            return None, "not pinned (no NUMA-local CPU list for the GPU)"
        return cpus, f"pinned to the {len(cpus)} CPUs local to the GPU"
    cpus = parse_cpulist(choice) & os.sched_getaffinity(0)
    if not cpus:
        raise SystemExit(f"overhead.py: --cpus {choice}: none of these CPUs is available")
    return cpus, f"pinned to CPUs {choice}"


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def run_once(args, mode, round_index, work, log, cpus=None, debug=False):
    """One run; returns (step times after --skip, trace bytes or None, error or None, output).
    debug: with LOCKSTEP_DEBUG=1 (the shim's counters at exit are in the output)."""
    tag = f"{mode}-r{round_index}"
    out_json = os.path.join(work, f"{tag}.json" if args.job == "gpt" else f"{tag}.{{rank}}.json")
    cmd = job_command(args, out_json)
    trace_dir = None
    level, torch_alloc, extra_env = EXTRA_MODES.get(mode, (mode, None, {}))
    if mode == "untraced":
        level = None
    if level is not None:
        trace_dir = os.path.join(work, f"trace-{tag}")
        shutil.rmtree(trace_dir, ignore_errors=True)
        alloc = ["--torch-alloc", torch_alloc] if torch_alloc else []
        cmd = [args.lockstep, "run", "-o", trace_dir, "--level", level] + alloc + ["--"] + cmd
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=args.timeout, errors="replace",
                              env=dict(os.environ, **extra_env,
                                       **({"LOCKSTEP_DEBUG": "1"} if debug else {})),
                              preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        output, rc = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
            else (e.stdout or "")
        rc = "timeout"
    if log:
        log.write(f"\n=== overhead {tag} rc={rc} {time.monotonic() - started:.1f}s: "
                  f"{' '.join(cmd)}\n{output[-4000:]}\n")
        log.flush()
    if rc != 0:
        return None, None, f"{tag}: exit {rc}: {output.strip().splitlines()[-1:] or ''}", output
    ranks = [0] if args.job == "gpt" else list(range(args.nproc))
    per_rank = []
    for rank in ranks:
        path = out_json.replace("{rank}", str(rank))
        try:
            with open(path) as f:
                per_rank.append(json.load(f)["step_times_s"])
        except (OSError, ValueError, KeyError) as e:
            return None, None, f"{tag}: no step times in {path}: {e}", output
    # A step ends when the slowest rank ends it.
    times = [max(ts) for ts in zip(*per_rank)][args.skip:]
    trace = None
    if trace_dir is not None:
        trace = dir_bytes(trace_dir) / args.steps / len(ranks)
        if not args.keep:
            shutil.rmtree(trace_dir, ignore_errors=True)
    return times, trace, None, output


SELF_TIME = re.compile(r"shim self time per step: ([0-9.]+) us steady")


def self_time_us(output):
    """The largest per-rank 'shim self time per step' a LOCKSTEP_DEBUG run printed, or None."""
    values = [float(v) for v in SELF_TIME.findall(output or "")]
    return max(values) if values else None


def main(argv=None):
    args = parse_args(argv)
    if not os.access(args.lockstep, os.X_OK):
        print(f"overhead.py: {args.lockstep}: no lockstep CLI there (build it, or pass "
              "--lockstep)", file=sys.stderr)
        return 2
    work = args.work or tempfile.mkdtemp(prefix="lockstep-overhead-")
    os.makedirs(work, exist_ok=True)
    log = open(args.log, "a") if args.log else None
    modes = ["untraced"] + args.levels
    cpus, pinned = pinning(args)
    times = {m: [] for m in modes}
    run_medians = {m: [] for m in modes}  # one per run: how far runs of one mode spread
    trace_bytes = {m: [] for m in modes}
    errors = []
    rounds_run = 0
    while rounds_run < args.rounds or (rounds_run < args.max_rounds and
                                       widest_spread(run_medians) > args.spread):
        r = rounds_run
        rounds_run += 1
        order = modes[r % len(modes):] + modes[:r % len(modes)]  # rotate: no fixed position
        for mode in order:
            t, b, err, _ = run_once(args, mode, r, work, log, cpus)
            if err:
                errors.append(err)
                print(f"overhead.py: {err}", file=sys.stderr)
                continue
            times[mode].extend(t)
            run_medians[mode].append(statistics.median(t))
            if b is not None:
                trace_bytes[mode].append(b)

    # The shim's own time per step, from --self-time-runs LOCKSTEP_DEBUG runs of each traced
    # mode (interleaved), their median.
    self_runs = {m: [] for m in args.levels}
    if args.self_time:
        for r in range(args.self_time_runs):
            for mode in args.levels:
                _, _, err, output = run_once(args, mode, f"debug{r}", work, log, cpus, debug=True)
                if err:
                    errors.append(err)
                    print(f"overhead.py: {err}", file=sys.stderr)
                us = self_time_us(output)
                if us is not None:
                    self_runs[mode].append(us)
    self_us = {m: statistics.median(v) for m, v in self_runs.items() if v}

    base = statistics.median(times["untraced"]) if times["untraced"] else None
    # The self time's share is taken of the fastest untraced run (its median step): the strictest
    # reading when the untraced runs themselves spread.
    fastest = min(run_medians["untraced"]) if run_medians["untraced"] else None
    rows = []
    for mode in modes:
        med = statistics.median(times[mode]) if times[mode] else None
        ratio = med / base if med and base else None
        target = TARGETS.get(mode)
        rows.append({
            "mode": mode, "median_step_ms": med * 1e3 if med else None,
            "steps_measured": len(times[mode]), "ratio": ratio, "target_ratio": target,
            "run_medians_ms": [round(t * 1e3, 3) for t in run_medians[mode]],
            "within_target": (ratio <= target) if ratio and target else None,
            "trace_bytes_per_step_per_rank":
                statistics.median(trace_bytes[mode]) if trace_bytes[mode] else None,
            "shim_self_us_per_step": self_us.get(mode),
            "shim_self_us_runs": self_runs.get(mode, []),
        })
        # The self time against the same target: its share of the untraced step.
        us = self_us.get(mode)
        share = us / (fastest * 1e6) if us is not None and fastest else None
        rows[-1]["shim_self_share"] = share
        rows[-1]["shim_self_within_target"] = \
            (1 + share <= target) if share is not None and target else None

    def fmt(v, spec):
        width = int(spec.split(".")[0].rstrip(",") or 0)
        return format(v, spec) if v is not None else "-".rjust(width)

    size = "job arguments " + " ".join(args.job_args) if args.job_args else f"size {args.size}"
    extra = ""
    if args.max_rounds > args.rounds:
        extra = (f" (of {args.rounds} to {args.max_rounds}: more while some mode's runs spread "
                 f"by more than {100 * args.spread:.0f}%)")
    print(f"overhead: job {args.job}, {size}, {rounds_run} rounds{extra} x {args.steps} steps "
          f"(first {args.skip} dropped), interleaved, {pinned}")
    print(f"{'mode':<14} {'median step ms':>14} {'ratio':>7} {'target':>7} {'ok':>3} "
          f"{'trace B/step/rank':>18}  runs (median ms each)")
    for row in rows:
        ok = {True: "yes", False: "NO", None: "-"}[row["within_target"]]
        spread = " ".join(f"{t:.1f}" for t in row["run_medians_ms"])
        print(f"{row['mode']:<14} {fmt(row['median_step_ms'], '14.3f')} "
              f"{fmt(row['ratio'], '7.3f')} {fmt(row['target_ratio'], '7.3f')} {ok:>3} "
              f"{fmt(row['trace_bytes_per_step_per_rank'], '18,.0f')}  {spread}")
    if args.self_time and base:
        print("shim self time per step (LOCKSTEP_DEBUG run, steady state, the job's threads; "
              "the real calls and the GPU not included), against the fastest untraced run "
              f"({fastest * 1e3:.3f} ms/step):")
        for row in rows:
            us, share, target = (row["shim_self_us_per_step"], row["shim_self_share"],
                                 row["target_ratio"])
            if row["mode"] == "untraced":
                continue
            if share is None:
                print(f"  {row['mode']:<14} {fmt(us, '10.1f')} us  not printed (no "
                      "LOCKSTEP_DEBUG line: at off the shim makes no tracer)")
                continue
            ok = {True: "yes", False: "NO", None: "-"}[row["shim_self_within_target"]]
            limit = f"target {100 * (target - 1):.1f}%" if target else "no target"
            print(f"  {row['mode']:<14} {us:10.1f} us  {100 * share:.2f}% of the untraced step"
                  f"  {limit} {ok}")
            if len(row["shim_self_us_runs"]) > 1:
                print("      runs: " + " ".join(f"{u:.1f}" for u in row["shim_self_us_runs"]) +
                      " us (the median above)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"job": args.job, "size": None if args.job_args else args.size,
                       "rounds": rounds_run, "min_rounds": args.rounds,
                       "max_rounds": args.max_rounds, "spread_limit": args.spread,
                       "widest_spread": widest_spread(run_medians), "steps": args.steps,
                       "cpus": sorted(cpus) if cpus else None,
                       "skip": args.skip, "job_args": args.job_args, "rows": rows,
                       "errors": errors, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")},
                      f, indent=1)
    if log:
        log.close()
    if not args.work and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if errors or base is None else 0


if __name__ == "__main__":
    sys.exit(main())
