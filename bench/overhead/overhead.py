#!/usr/bin/env python3
"""lockstep's overhead on a real PyTorch training job.

Runs examples/pytorch/train_gpt.py (or the DDP / TP x DP version, or train_unseen.py here: a
model of another build the examples do not contain) untraced and under `lockstep run` at each
level, interleaved so that drift in the machine hits every mode alike. By default
(--interleave chunks) one process per mode stays alive and the modes take turns of a few steps
each, the order rotating every round: on a shared host whose slow phases last seconds, whole runs
of identical jobs differ by 10-20% per step, turns seconds apart do not. Each job reports its
per-step wall times (it syncs once per step on loss.item()); the first --skip steps are dropped
(warm-up, cuBLAS heuristics, allocator growth). Prints one table: median step time per mode,
ratio to untraced (with turns: the median of each turn's ratio to the untraced turn of its
round), the issue's target, trace bytes per step per rank, and how far the measure spread (the
quartiles of those turn ratios, and each set's ratio).

Verdicts come from an interval, not from one median against the threshold (a median a hair on
either side of a target is noise). The interval is the distribution-free 95% confidence interval
of the median of the turns' ratios (order statistics; with 5 turns or fewer, their whole range),
widened to take in each set's own ratio (a process slower as a whole moves all turns of its set
alike, which an interval that takes turns as independent does not see); with --interleave runs,
the same of each round's ratio. PASS ("yes") when its upper end is within the target, FAIL ("NO")
when its lower end is above the target, otherwise KNOWN ("~"): within noise of the target, more
turns or sets would tell. The JSON row has it as "verdict", "ratio_interval" and
"within_target" (true, false, or null for KNOWN and for a mode with no target). The shim's own
time (--self-time) is judged the same way: the interval of the median of its LOCKSTEP_DEBUG
runs' shares of the untraced step ("shim_self_share_interval", "shim_self_verdict",
"shim_self_within_target").

  python3 bench/overhead/overhead.py --lockstep build/tools/lockstep
  python3 bench/overhead/overhead.py --job ddp --nproc 2 --levels broad
  python3 bench/overhead/overhead.py --job unseen --levels broad,full --sets 1 --chunks 8
  # What full's switch to PyTorch's cudaMallocAsync backend costs by itself, and full without it
  # (the untraced job on that backend; full on the caching allocator), with the shim's time and
  # its "alloc call" phase (the job's allocation calls) from --self-time:
  python3 bench/overhead/overhead.py --job unseen --levels untraced-async,full,full-caching \
      --sets 1 --chunks 6 --self-time
  # Two builds of the shim on one machine, interleaved (an A/B of a change to the hot path);
  # LEVEL@NAME's row is compared with LEVEL's round by round: the step turn by turn ("wall_paired",
  # the line "step, turn by turn"), and with --self-time the shim's own time run by run:
  python3 bench/overhead/overhead.py --size launch-bound --levels broad,broad@new \
      --shim new=/tmp/new/liblockstep.so --self-time --self-time-runs 3
"""

import argparse
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import run_facts  # this folder: commit, GPU, driver, date of the --json file
from paired import (median_interval, paired_difference, paired_ratio,  # this folder
                    paired_ratio_text, paired_text)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Ratio to untraced. broad: issue #34 (the shim's own time at most 1.0% of the step on every job,
# wall clock at most x1.01 on the gpu-bound one); full: FULL_TARGETS by job.
TARGETS = {"off": 1.005, "metrics": 1.01, "broad": 1.01, "full": 1.5}
LEVELS = ("off", "metrics", "broad", "full")
# Extra modes: full level with another PyTorch allocator choice (`lockstep run --torch-alloc`;
# plain `full` is the default, auto = cudaMallocAsync), and the untraced job on cudaMallocAsync,
# to separate the allocator's own cost from lockstep's. Name -> (level, --torch-alloc, env).
EXTRA_MODES = {
    "full-caching": ("full", "keep", {}),
    "full-nocache": ("full", "none", {}),
    "untraced-async": (None, None, {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}),
    # The small levels on full's allocator: with --self-time, the rest of their step (outside
    # the shim's timed phases, its real calls and the allocator's calls: the job's own host
    # code) is the reference for full's, so what full makes the job's own code cost shows.
    "metrics-async": ("metrics", None, {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}),
    "broad-async": ("broad", None, {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}),
    # Diagnostics, to split full's cost: a hash launch per kernel side instead of merged, and
    # every pointer region capped to 64 bytes (almost no bytes to read; not the same launches: a
    # clamped region is never learned read-only, so more outputs are hashed, 580 hash launches a
    # step against 280 on the GPT job with attention written out, docs/performance.md).
    "full-unmerged": ("full", None, {"LOCKSTEP_MERGE_HASHES": "0"}),
    "full-64B": ("full", None, {"LOCKSTEP_MAX_REGION": "64"}),
    # Every input hashed again (no reused digests): what reuse saves.
    "full-noreuse": ("full", None, {"LOCKSTEP_REUSE_DIGESTS": "0"}),
    # Inputs in allocations nothing wrote yet not hashed (opt-in: see collectors/README.md).
    "full-skip": ("full", None, {"LOCKSTEP_SKIP_UNWRITTEN": "1"}),
    # A freed pool allocation's digest given to the next allocation of its range (opt-in,
    # experimental: collectors/README.md): new output tensors not hashed before their kernel.
    "full-carry": ("full", None, {"LOCKSTEP_CARRY_FREED": "1"}),
    # Hash launches beside the next call on a side stream where it writes none of their regions
    # (opt-in, experimental: collectors/README.md, "Merged hash launches").
    "full-side": ("full", None, {"LOCKSTEP_SIDE_HASHES": "1"}),
    # Deferred hashes flushed before each metric copy (.item()) instead of held across it and
    # its synchronize (collectors/README.md, "Held across a host synchronization").
    "full-nohold": ("full", None, {"LOCKSTEP_HOLD_ACROSS_SYNC": "0"}),
    # Output hashes merged into the next call's launch only (no chained sets).
    "full-adjacent": ("full", None, {"LOCKSTEP_MERGE_HASHES": "adjacent"}),
    # Every kernel output hashed (no learned read-only pointers): what learning saves.
    "full-nolearn": ("full", None, {"LOCKSTEP_LEARN_READONLY": "0"}),
    # Every fill's output hashed (no recalled fill digests): what recalling saves.
    "full-norecall": ("full", None, {"LOCKSTEP_RECALL_FILLS": "0"}),
    # Broad without the state records of the PyTorch hook (python/lockstep/_torch_hooks.py):
    # what fingerprinting the parameters after every optimizer step costs.
    "broad-nostate": ("broad", None, {"LOCKSTEP_STATE": "off"}),
    # Broad with and without the module scopes of the PyTorch hook (python/lockstep/
    # _module_scopes.py; off at broad by default: LOCKSTEP_SCOPES=auto): what naming every
    # module's forward and backward and the optimizer step costs. Issue #29's target: at most
    # 0.5% more than broad without them, else they stay off at broad.
    "broad-noscopes": ("broad", None, {"LOCKSTEP_SCOPES": "0"}),
    "broad-scopes": ("broad", None, {"LOCKSTEP_SCOPES": "1"}),
    # Full without its module scopes (on at full by default): what naming the modules costs
    # there (Python hooks on every module call and backward node: the job's own host time).
    "full-noscopes": ("full", None, {"LOCKSTEP_SCOPES": "0"}),
}
# Modes run by another lockstep CLI than --lockstep (--shim NAME=FOLDER: another build's CLI,
# with its own shim and Python hooks). Mode -> CLI path.
MODE_CLIS = {}
TARGETS.update({"full-caching": 1.5})  # full-nocache: no target (PyTorch without caching)
# Job sizes (examples/pytorch/train_gpt.py arguments). Measured on one H200: gpu-bound ~35 ms per
# step with fused attention (~46 ms written out, three untraced runs within 0.5%); launch-bound
# 15-36 ms per step, the SM clock going between 345 and 1980 MHz during a run. gpu-bound-explicit is
# gpu-bound with attention written out (every head's 512x512 scores in fp32 written to memory):
# the job lockstep's full level was first measured on, kept as the memory-bound worst case.
# --job ddp and tpdp take the same arguments; the names describe the GPT job: train_tp_dp.py at
# gpu-bound (MLP blocks only, hidden 4 x dim, bucketed gradients) takes ~18 ms per step with ~700
# traced calls per step per rank, its GPUs busy ~15 (rank 1) to ~28 ms (rank 0, waiting in NCCL
# included) per ~32 ms profiled step (torch.profiler, two H200s, 2026-12-01).
SIZES = {
    "gpu-bound": ["--dim", "1024", "--layers", "8", "--batch", "32", "--seq", "512"],
    "launch-bound": ["--dim", "512", "--layers", "6", "--batch", "16", "--seq", "256"],
}
SIZES["gpu-bound-explicit"] = SIZES["gpu-bound"] + ["--attention", "explicit"]
# The jobs (--job): (script from the repository's root, started by torchrun with one process per
# rank, takes --size's train_gpt.py arguments). To add one: a row here; its script speaks
# train_gpt.py's protocol (--steps, --out JSON with "step_times_s", --gate: examples/pytorch/
# step_gate.py; under torchrun, --out with {rank}). unseen (bench/overhead/train_unseen.py) is the
# job the examples do not contain (issue #34): its own model, whose benchmark size is the
# script's defaults (dim 768, 12 layers, 12 heads / 4 KV heads, vocabulary 32000, batch
# 8 x 1024), so --size does not apply to it; arguments after -- change it.
JOBS = {
    "gpt": ("examples/pytorch/train_gpt.py", False, True),
    "ddp": ("examples/pytorch/train_ddp.py", True, True),
    "tpdp": ("examples/pytorch/train_tp_dp.py", True, True),
    "unseen": ("bench/overhead/train_unseen.py", False, False),
}
# full's target by (job, size) (issue #34), for full and for the modes that share its target
# (full-caching, full@NAME): at most x1.25 on the GPU-bound GPT job, x1.30 with its attention
# written out, x1.5 on the job the examples do not contain. Any other job or size, or a job given
# arguments of its own (after --): TARGETS["full"].
FULL_TARGETS = {("gpt", "gpu-bound"): 1.25, ("gpt", "gpu-bound-explicit"): 1.30,
                ("unseen", None): 1.5}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lockstep", default=os.path.join(REPO, "build", "tools", "lockstep"),
                   help="the lockstep CLI (default: build/tools/lockstep)")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--job", choices=list(JOBS), default="gpt",
                   help="gpt (default: examples/pytorch/train_gpt.py), ddp, tpdp (two or more "
                        "ranks), or unseen (bench/overhead/train_unseen.py: a model the examples "
                        "do not contain, with its own size)")
    p.add_argument("--nproc", type=int, default=2, help="processes for --job ddp or tpdp")
    p.add_argument("--levels", default=",".join(LEVELS),
                   help="comma-separated modes to measure: lockstep levels, or full-caching, "
                        "full-nocache, untraced-async (untraced always runs)")
    p.add_argument("--interleave", choices=["chunks", "runs"], default="chunks",
                   help="chunks (default): one process per mode, all alive at once, taking turns "
                        "of --chunk-steps steps (the jobs wait between turns: "
                        "examples/pytorch/step_gate.py), so that a slow phase of the machine "
                        "(seconds long on a shared host) falls on every mode alike; runs: one "
                        "whole run per mode per round (--rounds, --steps)")
    p.add_argument("--chunks", type=int, default=12,
                   help="--interleave chunks: turns per mode and set after the warm-up "
                        "(default 12)")
    p.add_argument("--sets", type=int, default=2,
                   help="--interleave chunks: sets of processes, one after the other, each with "
                        "a fresh process per mode (default 2): a process that runs slower as a "
                        "whole (its memory layout, say) is then one of several")
    p.add_argument("--chunk-steps", type=int, default=5,
                   help="--interleave chunks: steps per turn (default 5)")
    p.add_argument("--rounds", type=int, default=3,
                   help="--interleave runs: runs per mode (default 3)")
    p.add_argument("--max-rounds", type=int,
                   help="after --rounds, more rounds (up to this many in all) while some mode's "
                        "runs spread by more than --spread: one slow run of two or three moves "
                        "a pooled median; the rule looks at the runs' spread, never at the "
                        "ratios (default: --rounds, no extra rounds)")
    p.add_argument("--spread", type=float, default=0.05,
                   help="the spread of a mode's run medians (slowest / fastest - 1) that asks "
                        "for another round under --max-rounds (default 0.05)")
    p.add_argument("--steps", type=int, default=30,
                   help="steps of each whole run (--interleave runs, and the --self-time runs)")
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
    p.add_argument("--self-time-detail", action="store_true",
                   help="the --self-time runs with LOCKSTEP_DEBUG=2: the phases nested in a "
                        "call's begin and end (stamp, describe, append, ...) timed too, at a "
                        "few ns per nested scope, which the totals leave out")
    p.add_argument("--self-time-runs", type=int, default=1,
                   help="LOCKSTEP_DEBUG runs of each traced mode for --self-time, interleaved "
                        "(default 1); the median is reported, and each run's figure")
    p.add_argument("--shim", action="append", default=[], metavar="NAME=PATH",
                   help="another liblockstep.so (run through LOCKSTEP_LIB), or a whole build "
                        "or install tree (a folder with tools/lockstep or bin/lockstep: its CLI, "
                        "shim and Python hooks): adds a mode LEVEL@NAME for every level, "
                        "measured like the others, e.g. --shim new=/tmp/new/liblockstep.so "
                        "--levels broad,broad@new (repeatable)")
    p.add_argument("--cpus", default="gpu-local",
                   help="CPUs every run is pinned to: gpu-local (default for one-process "
                        "jobs, gpt and unseen: the "
                        "CPUs on the NUMA node of the first visible GPU, so that no run pays "
                        "for launches across sockets), all (no pinning; the default for "
                        "multi-rank jobs), or a list such as 0-15,32-47")
    p.add_argument("--size", choices=sorted(SIZES), default=None,
                   help="the job's model size: gpu-bound (default: the GPU is busy all step, as "
                        "in production training; its clocks stay up, identical runs agree "
                        "within about 1%%) or launch-bound (a small model whose step is the "
                        "CPU launching ~1000 kernels: the worst case for a tracer's CPU cost, "
                        "but the GPU idles between kernels and its clock changes make identical "
                        "runs differ by 20%% or more; judge it by --self-time), or "
                        "gpu-bound-explicit (gpu-bound with attention written out instead of "
                        "fused: memory-bound, the most bytes per step for full to hash); "
                        "--job ddp and tpdp get the same model arguments; not for --job "
                        "unseen, which has its own size")
    p.add_argument("job_args", nargs="*",
                   help="extra arguments for the job, after --  (replace --size's)")
    args = p.parse_args(argv)
    for shim in args.shim:
        name, _, path = shim.partition("=")
        if not name or not path or "@" in name or "," in name:
            p.error(f"--shim {shim!r}: expected NAME=PATH")
        if os.path.isdir(path):
            clis = [os.path.join(path, sub, "lockstep") for sub in ("tools", "bin")]
            clis = [cli for cli in clis if os.access(cli, os.X_OK)]
            if not clis:
                p.error(f"--shim {shim!r}: {path}: a folder with no tools/lockstep or bin/lockstep")
            cli, env = os.path.abspath(clis[0]), {}
        elif os.path.isfile(path):
            cli, env = None, {"LOCKSTEP_LIB": os.path.abspath(path)}
        else:
            p.error(f"--shim {shim!r}: {path}: no such file or folder")
        for lv in LEVELS:
            EXTRA_MODES[f"{lv}@{name}"] = (lv, None, env)
            if cli:
                MODE_CLIS[f"{lv}@{name}"] = cli
            if lv in TARGETS:
                TARGETS[f"{lv}@{name}"] = TARGETS[lv]
    if args.size is None:
        args.size = "gpu-bound" if JOBS[args.job][2] else None
    elif not JOBS[args.job][2]:
        p.error(f"--size is for the GPT jobs: --job {args.job} has its own size (job "
                "arguments after -- change it)")
    if args.self_time_runs < 1:
        p.error("--self-time-runs must be 1 or more")
    args.levels = [lv for lv in args.levels.split(",") if lv]
    for lv in args.levels:
        if lv not in LEVELS and lv not in EXTRA_MODES:
            p.error(f"unknown mode {lv!r} (one of {', '.join(LEVELS + tuple(EXTRA_MODES))})")
    if args.chunks < 1 or args.chunk_steps < 1 or args.sets < 1:
        p.error("--chunks, --chunk-steps and --sets must be 1 or more")
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


def distributed(args):
    """True for a job torchrun starts, one process per rank."""
    return JOBS[args.job][1]


def job_command(args, out_json, steps):
    script, _, sized = JOBS[args.job]
    extra = args.job_args or (SIZES[args.size] if sized else [])
    common = ["--steps", str(steps), "--out", out_json] + extra
    if not distributed(args):
        return [args.python, os.path.join(REPO, script)] + common
    return [args.python, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={args.nproc}", os.path.join(REPO, script)] + common


def target_of(args, mode):
    """The mode's target ratio, or None: TARGETS, with full's from FULL_TARGETS for this job and
    size (for every mode at the full level that has a target)."""
    target = TARGETS.get(mode)
    level = EXTRA_MODES[mode][0] if mode in EXTRA_MODES else mode
    if target is not None and level == "full" and not args.job_args:
        target = FULL_TARGETS.get((args.job, args.size), target)
    return target


def verdict(interval, target):
    """PASS when the interval's upper end is within the target, FAIL when its lower end is above
    the target, KNOWN when the target lies inside it (within noise of the target: the
    measurement cannot tell which side the ratio is on). None without a target or an interval."""
    if target is None or interval is None:
        return None
    low, high = interval
    if high <= target:
        return "PASS"
    if low > target:
        return "FAIL"
    return "KNOWN"


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
    if choice == "gpu-local" and distributed(args):
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


def mode_command(args, mode, tag, work, debug=False, gate=None):
    """The command, environment, --out path and trace folder (None: untraced) of one run."""
    out_json = os.path.join(work, f"{tag}.{{rank}}.json" if distributed(args) else f"{tag}.json")
    steps = args.steps if gate is None else chunk_steps_total(args)
    cmd = job_command(args, out_json, steps) + (["--gate", gate] if gate else [])
    trace_dir = None
    level, torch_alloc, extra_env = EXTRA_MODES.get(mode, (mode, None, {}))
    if mode == "untraced":
        level = None
    if level is not None:
        trace_dir = os.path.join(work, f"trace-{tag}")
        shutil.rmtree(trace_dir, ignore_errors=True)
        alloc = ["--torch-alloc", torch_alloc] if torch_alloc else []
        cli = MODE_CLIS.get(mode, args.lockstep)
        cmd = [cli, "run", "-o", trace_dir, "--level", level] + alloc + ["--"] + cmd
    debug_env = {"LOCKSTEP_DEBUG": "2" if getattr(args, "self_time_detail", False) else "1"}
    env = dict(os.environ, **extra_env, **(debug_env if debug else {}))
    return cmd, env, out_json, trace_dir


def ranks_of(args):
    return list(range(args.nproc)) if distributed(args) else [0]


def read_results(args, tag, out_json, trace_dir, steps):
    """(each step's time (the slowest rank's), trace bytes per step per rank or None, error or
    None) of a finished job."""
    per_rank = []
    for rank in ranks_of(args):
        path = out_json.replace("{rank}", str(rank))
        try:
            with open(path) as f:
                per_rank.append(json.load(f)["step_times_s"])
        except (OSError, ValueError, KeyError) as e:
            return None, None, f"{tag}: no step times in {path}: {e}"
    # A step ends when the slowest rank ends it.
    times = [max(ts) for ts in zip(*per_rank)]
    trace = None
    if trace_dir is not None:
        trace = dir_bytes(trace_dir) / steps / len(per_rank)
        if not args.keep:
            shutil.rmtree(trace_dir, ignore_errors=True)
    return times, trace, None


# A verdict as the tables print it in their "ok" column.
VERDICT_MARK = {"PASS": "yes", "FAIL": "NO", "KNOWN": "~", None: "-"}


def own_step_shares(us_runs, step_runs):
    """Each LOCKSTEP_DEBUG run's self time (us) as a share of that run's own median step (s)
    less the self time: the untraced step with its reference in the same run. The host's speed
    drifts between runs (the launch-bound job's untraced turns 21.9-27.1 ms apart on one H100), and
    the shim's time and the job's own work move with it; against another run's step that drift is
    the reading's spread. The step less the shim's time still holds what LOCKSTEP_DEBUG's timing
    costs and any slowing of the job's own code by the shim: a larger reference, so this reading
    is shown beside the one against the untraced job, not instead of it. Runs without a step
    are left out."""
    return [us / (step * 1e6 - us) for us, step in zip(us_runs, step_runs)
            if step is not None and step * 1e6 > us]


def rest_of_step_ms(phase_runs, step_runs):
    """Each LOCKSTEP_DEBUG run's median step (s) less its shim time and its "real call" and
    "alloc call" phases (us per step), in ms: the time the step spends outside every call the
    shim timed. phase_runs: (us, phases) per run, as self_time_phases() reads them; runs without
    a step are left out."""
    rest = []
    for (us, phases), step in zip(phase_runs, step_runs):
        if step is None:
            continue
        timed = us + sum(phases.get(name, {}).get("us_per_step", 0.0)
                         for name in ("real call", "alloc call"))
        rest.append(round((step * 1e6 - timed) / 1e3, 3))
    return rest


def run_once(args, mode, round_index, work, log, cpus=None, debug=False):
    """One run; returns (step times after --skip, trace bytes or None, error or None, output).
    debug: with LOCKSTEP_DEBUG=1 (the shim's counters at exit are in the output)."""
    tag = f"{mode}-r{round_index}"
    cmd, env, out_json, trace_dir = mode_command(args, mode, tag, work, debug)
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=args.timeout, errors="replace", env=env,
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
    times, trace, err = read_results(args, tag, out_json, trace_dir, args.steps)
    if err:
        return None, None, err, output
    return times[args.skip:], trace, None, output


def chunk_steps_total(args):
    return args.skip + args.chunks * args.chunk_steps


class GatedJob:
    """One mode's job, alive for the whole measurement, stepping when the driver lets it
    (examples/pytorch/step_gate.py): a FIFO pair per rank, held open read-write here so that
    neither side's open() waits for the other."""

    def __init__(self, args, mode, set_index, work, cpus):
        self.mode, self.error = mode, None
        self.tag = f"{mode}-set{set_index}"
        gate = os.path.join(work, f"gate-{self.tag}")
        os.makedirs(gate, exist_ok=True)
        self.go, self.done, self.pending = [], [], []
        for rank in ranks_of(args):
            for name, fds in (("go", self.go), ("done", self.done)):
                path = os.path.join(gate, f"{name}.{rank}")
                if os.path.exists(path):
                    os.unlink(path)
                os.mkfifo(path)
                fds.append(os.open(path, os.O_RDWR | os.O_NONBLOCK))
            self.pending.append(b"")
        self.cmd, env, self.out_json, self.trace_dir = mode_command(args, mode, self.tag, work,
                                                                    gate=gate)
        self.log_path = os.path.join(work, f"{self.tag}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            self.cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
            start_new_session=True)  # its own process group: a failure kills torchrun's ranks too

    def fail(self, why):
        if self.error is None:
            self.error = f"{self.tag}: {why}"
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()

    def step(self, n, timeout):
        """Lets every rank run n steps and waits until all have; on an exit or a timeout the job
        is failed (self.error) and killed, and its later turns are skipped."""
        if self.error:
            return
        for fd in self.go:
            os.write(fd, f"{n}\n".encode())
        deadline = time.monotonic() + timeout
        waiting = set(range(len(self.done)))
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail(f"no step done within {timeout:.0f} s")
                return
            ready, _, _ = select.select([self.done[r] for r in waiting], [], [], min(left, 1.0))
            for r in list(waiting):
                if self.done[r] in ready:
                    self.pending[r] += os.read(self.done[r], 4096)
                    if self.pending[r].endswith(b"\n"):
                        self.pending[r] = b""
                        waiting.discard(r)
            if waiting and self.proc.poll() is not None:
                self.fail(f"exit {self.proc.returncode} before its steps were done: "
                          f"{last_line(self.log_path)}")
                return

    def finish(self, args):
        """Waits for the job to exit; returns (every step's time, trace bytes per step per rank)."""
        try:
            rc = self.proc.wait(timeout=args.timeout) if not self.error else None
        except subprocess.TimeoutExpired:
            self.fail("did not exit after its last step")
            rc = None
        for fd in self.go + self.done:
            os.close(fd)
        self.log.close()
        if self.error:
            return None, None
        if rc != 0:
            self.error = f"{self.tag}: exit {rc}: {last_line(self.log_path)}"
            return None, None
        times, trace, err = read_results(args, self.tag, self.out_json, self.trace_dir,
                                         chunk_steps_total(args))
        self.error = err
        return times, trace


def last_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().strip().splitlines()
        return lines[-1] if lines else ""
    except OSError:
        return ""


def run_chunks(args, modes, set_index, work, log, cpus):
    """One set: every mode's job at once, each running --chunk-steps steps in turn (the order
    rotating by one mode every round), after a first chunk of --skip warm-up steps. Returns
    {mode: (list of chunks of step times, trace bytes or None)} and the errors."""
    jobs = [GatedJob(args, mode, set_index, work, cpus) for mode in modes]
    # Start-up (imports, the model, CUDA) overlaps; the warm-up chunk runs one job at a time.
    schedule = ([args.skip] if args.skip else []) + [args.chunk_steps] * args.chunks
    for c, n in enumerate(schedule):
        order = jobs[c % len(jobs):] + jobs[:c % len(jobs)]
        for job in order:
            job.step(n, args.timeout)
    results, errors = {}, []
    for job in jobs:
        times, trace = job.finish(args)
        if log:
            with open(job.log_path, errors="replace") as f:
                log.write(f"\n=== overhead {job.tag} {'error' if job.error else 'ok'}: "
                          f"{' '.join(job.cmd)}\n{f.read()[-4000:]}\n")
            log.flush()
        if job.error:
            errors.append(job.error)
            continue
        measured = times[args.skip:]
        chunks = [measured[i:i + args.chunk_steps]
                  for i in range(0, len(measured), args.chunk_steps)]
        results[job.mode] = (chunks, trace)
    return results, errors


def quartiles(values):
    """(25th, 75th percentile) of values, or None with fewer than two."""
    if len(values) < 2:
        return None
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


SELF_TIME = re.compile(r"lockstep\[(\d+)\]: (?:debug: )?shim self time per step: ([0-9.]+) us steady "
                       r"\(([0-9]+) steps\)")
# One phase of the "shim self time: " line (common/self_time.h, report()).
PHASE = re.compile(r"([a-z ]+?) ([0-9]+) x ([0-9]+) ns")
# The PyTorch state hook's time (python/lockstep/_torch_hooks.py, HookTime): Python the job runs
# for lockstep after each optimizer step, around the shim's state call (its "state" phase).
HOOK_TIME = re.compile(r"lockstep\[(\d+)\]: python state hook self time: ([0-9]+) x ([0-9]+) ns")


def self_time_ranks(output):
    """{pid: (us per step, steps, {phase: {"calls_per_step", "ns_per_call", "us_per_step"}})}
    for each process (rank) whose LOCKSTEP_DEBUG lines a run printed: the shim's steady self
    time per step plus its PyTorch state hook's, and where it went (steady calls only; with
    --self-time-detail the nested phases too)."""
    output = output or ""
    reports = dict(re.findall(r"lockstep\[(\d+)\]: (?:debug: )?shim self time: (.*?); timing taken out",
                              output))
    hooks = {pid: (int(calls), int(ns)) for pid, calls, ns in HOOK_TIME.findall(output)}
    ranks = {}
    for pid, us, steps in SELF_TIME.findall(output):
        steps = max(1, int(steps))
        phases = {}
        for part in reports.get(pid, "").split(", "):
            m = PHASE.match(part.strip())
            if m:
                name, calls, ns = m.group(1), int(m.group(2)), int(m.group(3))
                phases[name] = {"calls_per_step": calls / steps, "ns_per_call": ns,
                                "us_per_step": calls * ns / steps / 1e3}
        total = float(us)
        if pid in hooks:
            # The hook's time holds its call of the shim (the "state" phase, already counted):
            # only the rest is added, the hook's own Python.
            calls, ns = hooks[pid]
            own = max(0.0, calls * ns / steps / 1e3 - phases.get("state", {}).get("us_per_step", 0))
            phases["python state hook"] = {"calls_per_step": calls / steps,
                                           "ns_per_call": round(own * 1e3 * steps / max(1, calls)),
                                           "us_per_step": own}
            total += own
        ranks[pid] = (total, steps, phases)
    return ranks


def self_time_us(output):
    """The largest per-rank self time per step (the shim's and its state hook's) a LOCKSTEP_DEBUG
    run printed, or None."""
    ranks = self_time_ranks(output)
    return max(us for us, _, _ in ranks.values()) if ranks else None


def self_time_phases(output):
    """Where the self time went, per step, of the rank whose self time was largest: {phase:
    {"calls_per_step", "ns_per_call", "us_per_step"}}, or {}."""
    ranks = self_time_ranks(output)
    return max(ranks.values(), key=lambda rank: rank[0])[2] if ranks else {}


def spread_text(row, chunks):
    """The table's last column: how far the measurement of this mode spread."""
    if row["chunk_ratio_quartiles"]:
        lo, hi = row["chunk_ratio_quartiles"]
        sets = " ".join(f"{r:.3f}" for r in row["set_ratios"])
        return f"{chunks} chunks, ratio IQR {lo:.3f}-{hi:.3f}, sets {sets}"
    if row["chunk_ms_quartiles"]:
        lo, hi = row["chunk_ms_quartiles"]
        return f"{chunks} chunks, IQR {lo:.1f}-{hi:.1f} ms"
    if chunks:
        return f"{chunks} chunks"
    return "runs " + " ".join(f"{t:.1f}" for t in row["run_medians_ms"])


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
    round_medians = {m: {} for m in modes}  # --interleave runs: round -> that run's median
    trace_bytes = {m: [] for m in modes}
    errors = []
    rounds_run = 0
    # --interleave chunks: each set's turns (their medians).
    set_chunks = {m: [] for m in modes}
    for set_index in range(args.sets if args.interleave == "chunks" else 0):
        results, set_errors = run_chunks(args, modes, set_index, work, log, cpus)
        for err in set_errors:
            print(f"overhead.py: {err}", file=sys.stderr)
        errors += set_errors
        for mode in modes:
            chunks, b = results.get(mode, ([], None))
            times[mode] += [t for chunk in chunks for t in chunk]
            set_chunks[mode].append([statistics.median(c) for c in chunks if c])
            if b is not None:
                trace_bytes[mode].append(b)
    chunk_medians = {m: [t for one in set_chunks[m] for t in one] for m in modes}
    while args.interleave == "runs" and (
            rounds_run < args.rounds or (rounds_run < args.max_rounds and
                                         widest_spread(run_medians) > args.spread)):
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
            round_medians[mode][r] = statistics.median(t)
            if b is not None:
                trace_bytes[mode].append(b)

    # The shim's own time per step, from --self-time-runs LOCKSTEP_DEBUG runs of each traced
    # mode (interleaved, the order rotating every round as the turns' does: in two A/Bs whose
    # modes ran the same shim binary in a fixed order, every launch phase and the job's own
    # real calls read 5-10% apart, an order effect no build could be told from), their median.
    self_by_round = {m: {} for m in args.levels}  # round -> us (two builds' runs are paired)
    self_phases = {m: [] for m in args.levels}  # per run, as self_time_phases() reads it
    # Each LOCKSTEP_DEBUG run's own median step (s), for the in-run reading (own_step_shares).
    self_steps = {m: [] for m in args.levels}
    # And its shim time per microsecond of the job's own real calls (the driver's launches, the
    # libraries' calls; LOCKSTEP_DEBUG's "real call" phase), round by round: host-normalized.
    self_per_real = {m: {} for m in args.levels}
    if args.self_time:
        levels = list(args.levels)
        for r in range(args.self_time_runs):
            for mode in levels[r % len(levels):] + levels[:r % len(levels)]:
                t, _, err, output = run_once(args, mode, f"debug{r}", work, log, cpus, debug=True)
                if err:
                    errors.append(err)
                    print(f"overhead.py: {err}", file=sys.stderr)
                us = self_time_us(output)
                if us is not None:
                    self_by_round[mode][r] = us
                    phases = self_time_phases(output)
                    self_phases[mode].append((us, phases))
                    self_steps[mode].append(statistics.median(t) if t else None)
                    real = phases.get("real call", {}).get("us_per_step")
                    if real:
                        self_per_real[mode][r] = us / real
    self_runs = {m: list(by_round.values()) for m, by_round in self_by_round.items()}  # in order
    self_us = {m: statistics.median(v) for m, v in self_runs.items() if v}

    def median_run_phases(mode):
        """The phases of the run whose self time is the median (the lower middle of an even
        count): the breakdown of the figure reported."""
        runs = sorted(self_phases.get(mode, []), key=lambda run: run[0])
        return runs[(len(runs) - 1) // 2][1] if runs else {}

    base = statistics.median(times["untraced"]) if times["untraced"] else None
    # The self time's share is taken of the fastest untraced run (its median step): the strictest
    # reading when whole runs spread. With turns, of the untraced job's median step over all its
    # turns (the one run that run.sh's launch-bound row had before the turns).
    if args.interleave == "chunks":
        self_base = base
        reference = "the untraced median step"
    else:
        self_base = min(run_medians["untraced"]) if run_medians["untraced"] else None
        reference = "the fastest untraced run"
    rows = []
    for mode in modes:
        med = statistics.median(times[mode]) if times[mode] else None
        pooled_ratio = med / base if med and base else None
        # Turns: each turn's median against the untraced turn of the same round (a second or so
        # apart), per set. Their median is the ratio: a slow phase of the machine falls on both
        # turns of a pair, while a ratio of pooled medians moves with how many slow steps each
        # mode happened to draw (pooled step times are bimodal on a host with slow phases).
        paired_sets = [[m / u for m, u in zip(mine, theirs) if u > 0]
                       for mine, theirs in zip(set_chunks[mode], set_chunks["untraced"])]
        paired = [r for one in paired_sets for r in one]
        ratio = pooled_ratio
        if args.interleave == "chunks":
            ratio = statistics.median(paired) if paired else None
            interval = median_interval(paired)
            # Each set's own ratio too: fresh processes, whose whole-process differences the
            # turns' interval (turns taken as independent) does not see.
            for one in paired_sets:
                if one and interval:
                    mid = statistics.median(one)
                    interval = (min(interval[0], mid), max(interval[1], mid))
        else:
            base_runs = round_medians["untraced"]
            interval = median_interval([t / base_runs[r] for r, t in round_medians[mode].items()
                                        if base_runs.get(r)])
            if interval and ratio:  # the pooled ratio may fall outside the rounds' ratios
                interval = (min(interval[0], ratio), max(interval[1], ratio))
        if mode == "untraced" or not ratio:
            interval = None
        target = target_of(args, mode)
        judged = verdict(interval, target)
        rows.append({
            "mode": mode, "median_step_ms": med * 1e3 if med else None,
            "steps_measured": len(times[mode]), "ratio": ratio, "target_ratio": target,
            "pooled_ratio": pooled_ratio,
            "run_medians_ms": [round(t * 1e3, 3) for t in run_medians[mode]],
            "ratio_interval": list(interval) if interval else None, "verdict": judged,
            "within_target": {"PASS": True, "FAIL": False}.get(judged),
            "trace_bytes_per_step_per_rank":
                statistics.median(trace_bytes[mode]) if trace_bytes[mode] else None,
            "shim_self_us_per_step": self_us.get(mode),
            "shim_self_us_runs": self_runs.get(mode, []),
            "shim_self_phases": median_run_phases(mode) if mode in self_phases else {},
            "chunk_medians_ms": [round(t * 1e3, 3) for t in chunk_medians[mode]],
        })
        # How precisely the turns pin the ratio down: the quartiles of the paired ratios, and
        # each set's own ratio (fresh processes per set: a process that runs slower as a whole
        # shows as sets that disagree).
        untraced = mode == "untraced"
        rows[-1]["chunk_ratio_quartiles"] = None if untraced else quartiles(paired)
        rows[-1]["set_ratios"] = [] if untraced else \
            [statistics.median(one) for one in paired_sets if one]
        rows[-1]["chunk_ms_quartiles"] = (
            tuple(q * 1e3 for q in quartiles(chunk_medians[mode]))
            if mode == "untraced" and len(chunk_medians[mode]) > 1 else None)
        # The self time against the same target: its share of the untraced step, judged from
        # the interval of its runs' median as the ratios are (3 runs: their range), so that one
        # median a hair over the goal is no FAIL and one under it no PASS.
        us = self_us.get(mode)
        share = us / (self_base * 1e6) if us is not None and self_base else None
        shares = [u / (self_base * 1e6) for u in self_runs.get(mode, [])] if self_base else []
        share_interval = median_interval(shares)
        self_verdict = verdict((1 + share_interval[0], 1 + share_interval[1])
                               if share_interval else None, target)
        rows[-1]["shim_self_share"] = share
        rows[-1]["shim_self_share_interval"] = list(share_interval) if share_interval else None
        # The in-run reading, shown beside it (own_step_shares).
        own = own_step_shares(self_runs.get(mode, []), self_steps.get(mode, []))
        own_interval = median_interval(own)
        rows[-1]["shim_self_step_ms_runs"] = [None if t is None else round(t * 1e3, 3)
                                              for t in self_steps.get(mode, [])]
        rows[-1]["shim_self_own_share"] = statistics.median(own) if own else None
        rows[-1]["shim_self_own_share_interval"] = list(own_interval) if own_interval else None
        rows[-1]["shim_self_own_verdict"] = verdict(
            (1 + own_interval[0], 1 + own_interval[1]) if own_interval else None, target)
        rows[-1]["shim_self_verdict"] = self_verdict
        # What is left of each LOCKSTEP_DEBUG run's step outside the shim's own time, the job's
        # real calls and its allocator's calls: the job's own host code (Python, the framework),
        # with whatever the shim's work makes it cost (its caches, its memory). Against a small
        # level's on the same allocator (metrics-async), the slowing of the job's own code.
        rest = rest_of_step_ms(self_phases.get(mode, []), self_steps.get(mode, []))
        rows[-1]["rest_of_step_ms_runs"] = rest
        rows[-1]["rest_of_step_ms"] = statistics.median(rest) if rest else None
        rows[-1]["shim_self_within_target"] = {"PASS": True, "FAIL": False}.get(self_verdict)
        # Another build's mode (LEVEL@NAME) against this build's LEVEL, run by run: its self-time
        # runs took turns with this build's, so each round's pair shares the host's phase.
        level, _, other = mode.partition("@")
        pair = None
        if other and level in self_by_round:
            rounds = sorted(set(self_by_round[level]) & set(self_by_round[mode]))
            pair = paired_difference([self_by_round[level][r] for r in rounds],
                                     [self_by_round[mode][r] for r in rounds])
        rows[-1]["shim_self_paired"] = dict(pair, mode=level) if pair else None
        # The same rounds with the host's speed taken out: each run's shim time per microsecond
        # of the job's own real calls. Across runs of one build on an H100 the two moved together
        # (r = 0.90 over 17 runs, 2026-12-05): a slower phase of the host lengthens both, so
        # this ratio moves less than the shim's time does (docs/performance.md, Method).
        per_real = None
        if other and level in self_per_real:
            rounds = sorted(set(self_per_real[level]) & set(self_per_real[mode]))
            per_real = paired_ratio([self_per_real[level][r] for r in rounds],
                                    [self_per_real[mode][r] for r in rounds])
        rows[-1]["shim_self_paired_per_real_call"] = (dict(per_real, mode=level)
                                                      if per_real else None)
        # And the wall step, turn by turn (--interleave chunks): each round's LEVEL turn over
        # its LEVEL@NAME turn, seconds apart, where each mode's ratio to untraced carries the
        # untraced turns' noise twice and cannot tell a few percent apart.
        wall = None
        if other and level in set_chunks and args.interleave == "chunks":
            pairs = [(a, b) for mine, theirs in zip(set_chunks[level], set_chunks[mode])
                     for a, b in zip(mine, theirs)]
            wall = paired_ratio([a for a, _ in pairs], [b for _, b in pairs])
        rows[-1]["wall_paired"] = dict(wall, mode=level) if wall else None

    # The spread column, as printed, also in the JSON: tests/gpu shows it without reading text.
    for row in rows:
        row["spread"] = spread_text(row, len(chunk_medians[row["mode"]]))

    def fmt(v, spec):
        width = int(spec.split(".")[0].rstrip(",") or 0)
        return format(v, spec) if v is not None else "-".rjust(width)

    size = "job arguments " + " ".join(args.job_args) if args.job_args else \
        f"size {args.size}" if args.size else "its own size"
    if args.interleave == "chunks":
        print(f"overhead: job {args.job}, {size}, {args.sets} set(s) of one process per mode, "
              f"{args.chunks} chunks of {args.chunk_steps} steps each in turn per set (after "
              f"{args.skip} warm-up steps), {pinned}; ratio: the median of each turn's ratio to "
              f"the untraced turn of its round")
    else:
        extra = ""
        if args.max_rounds > args.rounds:
            extra = (f" (of {args.rounds} to {args.max_rounds}: more while some mode's runs "
                     f"spread by more than {100 * args.spread:.0f}%)")
        print(f"overhead: job {args.job}, {size}, {rounds_run} rounds{extra} x {args.steps} "
              f"steps (first {args.skip} dropped), interleaved, {pinned}")
    print(f"{'mode':<14} {'median step ms':>14} {'ratio':>7} {'95% interval':>13} "
          f"{'target':>7} {'ok':>3} {'trace B/step/rank':>18}  spread")
    for row in rows:
        # ~: the target lies inside the interval (within noise of it; KNOWN in the GPU suite).
        ok = VERDICT_MARK[row["verdict"]]
        spread = row["spread"]
        interval = "-"
        if row["ratio_interval"]:
            interval = "{:.3f}-{:.3f}".format(*row["ratio_interval"])
        print(f"{row['mode']:<14} {fmt(row['median_step_ms'], '14.3f')} "
              f"{fmt(row['ratio'], '7.3f')} {interval:>13} {fmt(row['target_ratio'], '7.3f')} "
              f"{ok:>3} {fmt(row['trace_bytes_per_step_per_rank'], '18,.0f')}  {spread}")
    for row in rows:
        if row["wall_paired"]:
            pair = row["wall_paired"]
            print("step, turn by turn: " + paired_ratio_text(pair["mode"], row["mode"], pair))
    if args.self_time and base:
        print("shim self time per step (LOCKSTEP_DEBUG run, steady state, the job's threads; "
              f"the real calls and the GPU not included), against {reference} "
              f"({self_base * 1e3:.3f} ms/step):")
        for row in rows:
            us, share, target = (row["shim_self_us_per_step"], row["shim_self_share"],
                                 row["target_ratio"])
            if row["mode"] == "untraced":
                continue
            if share is None:
                print(f"  {row['mode']:<14} {fmt(us, '10.1f')} us  not printed (no "
                      "LOCKSTEP_DEBUG line: at off the shim makes no tracer)")
                continue
            ok = VERDICT_MARK[row["shim_self_verdict"]]
            limit = f"target {100 * (target - 1):.1f}%" if target else "no target"
            lo, hi = row["shim_self_share_interval"] or (share, share)
            print(f"  {row['mode']:<14} {us:10.1f} us  {100 * share:.2f}% of the untraced step"
                  f" [{100 * lo:.2f}-{100 * hi:.2f}%]  {limit} {ok}")
            if len(row["shim_self_us_runs"]) > 1:
                print("      runs: " + " ".join(f"{u:.1f}" for u in row["shim_self_us_runs"]) +
                      " us (the median above)")
            if row.get("shim_self_own_share") is not None:
                lo, hi = row["shim_self_own_share_interval"]
                ok = VERDICT_MARK[row["shim_self_own_verdict"]]
                steps = " ".join(fmt(t, ".2f") for t in row["shim_self_step_ms_runs"])
                print(f"      in-run: {100 * row['shim_self_own_share']:.2f}% [{100 * lo:.2f}-"
                      f"{100 * hi:.2f}%] of each run's own step less its shim time {ok} "
                      f"(steps {steps} ms)")
            if row.get("rest_of_step_ms") is not None:
                runs = " ".join(f"{t:.2f}" for t in row["rest_of_step_ms_runs"])
                print(f"      rest of the step: {row['rest_of_step_ms']:.2f} ms (outside the "
                      f"shim, its real calls and alloc calls: the job's own host code; runs "
                      f"{runs})")
            if row["shim_self_paired"]:
                pair = row["shim_self_paired"]
                print("      " + paired_text(pair["mode"], row["mode"], pair, "us"))
            if row["shim_self_paired_per_real_call"]:
                pair = row["shim_self_paired_per_real_call"]
                print("      per the job's own real-call time: " +
                      paired_ratio_text(pair["mode"], row["mode"], pair))
            phases = sorted(row["shim_self_phases"].items(), key=lambda kv: -kv[1]["us_per_step"])
            if phases:
                print("      per step: " + ", ".join(
                    f"{name} {p['calls_per_step']:.0f} x {p['ns_per_call']} ns = "
                    f"{p['us_per_step']:.1f} us" for name, p in phases))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"job": args.job, "size": None if args.job_args else args.size,
                       "interleave": args.interleave, "chunks": args.chunks, "sets": args.sets,
                       "chunk_steps": args.chunk_steps, "rounds": rounds_run, "min_rounds": args.rounds,
                       "max_rounds": args.max_rounds, "spread_limit": args.spread,
                       "widest_spread": widest_spread(run_medians), "steps": args.steps,
                       "cpus": sorted(cpus) if cpus else None,
                       "skip": args.skip, "job_args": args.job_args, "rows": rows,
                       "errors": errors, **run_facts.facts()},
                      f, indent=1)
    if log:
        log.close()
    if not args.work and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if errors or base is None else 0


if __name__ == "__main__":
    sys.exit(main())
