"""Group f: overhead of each level on the GPT job and on a job the examples do not contain
(bench/overhead/overhead.py, whose JSON holds the ratios, their intervals, its targets and its
verdicts: read here, never judged again), and the per-launch cost
(bench/collectors/gpu_launch_bench.sh).

Sizes of the GPT job: gpu-bound, as production training is: the ratios to the untraced step
are judged against the issue's targets (full at most x1.25; x1.30 with attention written out).
launch-bound, the worst case for a tracer's CPU cost: its ratios are shown but not judged (the
idle GPU's clock moves between 345 and 1980 MHz within a run, so identical untraced runs differ
by 20% and more); the shim's own time per step is judged against the same targets instead.
unseen: bench/overhead/train_unseen.py (RMSNorm, SwiGLU, rotary, grouped-query attention,
Adafactor): full at most x1.5, broad shown.

A verdict is overhead.py's, from the ratio's 95% interval: PASS when its upper end is within the
target, FAIL when its lower end is above it, KNOWN when the target lies inside it (within noise
of the target: more turns would tell)."""

import os
import re

import pytest

import gpu_suite
from gpu_suite import fmt, load_overhead, overhead_numbers, overhead_rest

OVERHEAD = os.path.join(gpu_suite.ROOT, "bench", "overhead", "overhead.py")
SELF_TIME_RUNS = int(os.environ.get("SELF_TIME_RUNS", "3"))
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def tools(gs):
    if not gs.have_torch() or not gs.have_lockstep():
        pytest.skip(f"needs torch with CUDA and {gs.config.lockstep}")


def overhead(gs, name, limit, json_name, *args):
    """Runs overhead.py; (Run, its rows by mode or None)."""
    path = gs.path(json_name)
    if os.path.exists(path):
        os.unlink(path)  # a stale file is not this run's result
    run = gs.run(name, limit, [gs.config.py, OVERHEAD, "--lockstep", gs.config.lockstep,
                               "--python", gs.config.py, "--json", path, "--log", gs.log_path,
                               *args])
    return run, load_overhead(path)


def mode_rows(row, run, rows, prefix, judged=True):
    """A row per mode: untraced its step; the others their ratio and its interval against the
    target (overhead.py's verdict: PASS, FAIL, or KNOWN within noise of the target), or shown
    only (no target, judged=False, or a mode not in the set `judged`)."""
    if run.rc != 0 or rows is None:
        row.add(prefix, "FAIL", f"rc {run.rc}: {run.last_err()}")
        return
    for mode, r in rows.items():
        check = f"{prefix} {mode}"
        if mode == "untraced":
            row.add(check, "PASS", f"{fmt(r['median_step_ms'], '.3f')} ms/step "
                                   f"({r.get('spread') or '-'})", overhead_numbers(r))
            continue
        judge = judged is True or (judged and mode in judged)
        target = r.get("target_ratio") if judge else None
        ratio = f"x{fmt(r.get('ratio'), '.3f')}"
        interval = r.get("ratio_interval")
        if interval:
            ratio += f" [{interval[0]:.3f}-{interval[1]:.3f}]"
        # With --self-time: where a traced mode's time goes on the launching thread (the shim's
        # own time a step in one LOCKSTEP_DEBUG run, against the untraced step), shown.
        if r.get("shim_self_us_per_step") is not None and r.get("shim_self_share") is not None:
            ratio += (f" (shim {r['shim_self_us_per_step'] / 1e3:.1f} ms/step on the job's "
                      f"threads, {100 * r['shim_self_share']:.1f}% of the untraced step)")
        if target is None:
            shown = "no target" if judge else "shown, not judged"
            row.add(check, "PASS", f"{ratio} ({shown}), {overhead_rest(r)}", overhead_numbers(r))
        else:
            result = r.get("verdict") or "FAIL"  # no verdict: no interval to judge
            noise = ", within noise of it" if result == "KNOWN" else ""
            figure = f"{ratio} (target x{target:.3f}{noise}), {overhead_rest(r)}"
            row.add(check, result, figure, overhead_numbers(r))


@pytest.mark.row("overhead")
def test_f_gpu_bound_job_within_targets(gs, row, tools):
    # full = cudaMallocAsync (the default of `lockstep run --level full`); add full-caching (the
    # same level on PyTorch's caching allocator) through OVERHEAD_MODES. One process per mode,
    # taking turns of 5 steps: whole runs of the same untraced job differed by up to 20% per
    # step on one H200 host (slow phases of seconds within and across runs).
    row.need(200)
    run, rows = overhead(gs, "overhead", 420, "overhead.json", "--sets", 2, "--chunks",
                         os.environ.get("OVERHEAD_CHUNKS", "30"), "--chunk-steps", 5, "--skip", 5,
                         "--levels", os.environ.get("OVERHEAD_MODES", "off,metrics,broad,full"),
                         "--size", "gpu-bound")
    mode_rows(row, run, rows, "overhead")


@pytest.mark.row("overhead explicit-attention")
def test_f_explicit_attention_within_its_target(gs, row, tools):
    # Attention written out (memory-bound: every head's scores in fp32 go through memory, the
    # most bytes per step for full to hash): full at most x1.30 (issue #34; overhead.py's
    # FULL_TARGETS).
    row.need(150)
    run, rows = overhead(gs, "overhead-explicit", 240, "overhead-explicit.json", "--sets", 1,
                         "--chunks", 8, "--chunk-steps", 5, "--skip", 5, "--levels", "full",
                         "--size", "gpu-bound-explicit")
    mode_rows(row, run, rows, "overhead explicit-attention")


@pytest.mark.row("overhead unseen")
def test_f_unseen_job_within_its_target(gs, row, tools):
    # A job the examples do not contain (bench/overhead/train_unseen.py: RMSNorm, SwiGLU, rotary
    # embeddings, grouped-query attention, untied embeddings, vocabulary 32000, Adafactor with a
    # cosine schedule and clipping; dim 768, 12 layers, batch 8 x 1024): full at most x1.5
    # (issue #34), broad shown. One set of 8 turns (UNSEEN_CHUNKS): about two minutes with
    # start-up; a noisy instance's interval narrows with more. One
    # LOCKSTEP_DEBUG run per mode (~20 s each) says how much of full's cost is the launching
    # thread's own time (this job syncs ~220 times a step: that time adds to its step).
    row.need(180)
    run, rows = overhead(gs, "overhead-unseen", 300, "overhead-unseen.json", "--job", "unseen",
                         "--sets", 1, "--chunks", os.environ.get("UNSEEN_CHUNKS", "8"),
                         "--chunk-steps", 5, "--skip", 5,
                         "--levels", "broad,full", "--self-time", "--self-time-runs", 1)
    mode_rows(row, run, rows, "overhead unseen", judged={"full"})


@pytest.mark.row("launch-bound self time")
def test_f_launch_bound_shim_time_within_targets(gs, row, tools):
    row.need(120)
    # Its limit grows with SELF_TIME_RUNS: each round runs the four modes once under
    # LOCKSTEP_DEBUG, 10-13 s a run (one H100, 2026-12-05: nine rounds did not fit in 420 s).
    limit = 240 + 60 * SELF_TIME_RUNS
    run, rows = overhead(gs, "overhead-launch", limit, "overhead-launch-bound.json", "--sets", 1,
                         "--chunks", 8, "--chunk-steps", 5, "--steps", 25, "--skip", 5,
                         "--levels", "off,metrics,broad,full", "--size", "launch-bound",
                         "--self-time", "--self-time-runs", SELF_TIME_RUNS)
    if run.rc != 0 or rows is None:
        row.add("launch-bound overhead", "FAIL", f"rc {run.rc}: {run.last_err()}")
        return
    ratios = ", ".join(f"{m} {fmt(r['median_step_ms'], '.3f')} ms" if m == "untraced"
                       else f"{m} x{fmt(r.get('ratio'), '.3f')}" for m, r in rows.items())
    row.add("launch-bound ratios", "PASS", f"not judged (GPU clock): {ratios}",
            {m: overhead_numbers(r) for m, r in rows.items()})
    # The shim's own time per step (the median of SELF_TIME_RUNS LOCKSTEP_DEBUG=1 runs per mode)
    # as a share of the untraced step, against the same targets: overhead.py's verdict from the
    # interval of the runs' median (3 runs: their range). FAIL when a mode's interval lies over
    # its target, KNOWN when one straddles it (within noise), else PASS.
    shown = [(m, r) for m, r in rows.items() if r.get("shim_self_share") is not None]
    parts = []
    for m, r in shown:
        judged, goal = r.get("shim_self_verdict"), 100 * (r["target_ratio"] - 1)
        mark = {"FAIL": f" > {goal:.1f}%", "KNOWN": f" ~ {goal:.1f}%"}.get(judged, "")
        lo, hi = r.get("shim_self_share_interval") or (r["shim_self_share"],) * 2
        # The in-run reading (each run's own step as its reference), shown, not judged.
        own = r.get("shim_self_own_share_interval")
        own = f"; in-run {100 * own[0]:.2f}-{100 * own[1]:.2f}%" if own else ""
        parts.append(f"{m} {r['shim_self_us_per_step']:.1f} us "
                     f"({100 * r['shim_self_share']:.2f}% [{100 * lo:.2f}-{100 * hi:.2f}]{mark}"
                     f"{own})")
    figure = f"per step, median of {SELF_TIME_RUNS} runs [their interval]: " + ", ".join(parts)
    numbers = {m: overhead_numbers(r) for m, r in shown}
    verdicts = {r.get("shim_self_verdict") for _, r in shown}
    if not shown:
        row("FAIL", "no LOCKSTEP_DEBUG self-time line")
    elif "FAIL" in verdicts:
        row("FAIL", figure, numbers)
    elif "KNOWN" in verdicts:
        row("KNOWN", figure + " (within noise of a target)", numbers)
    else:
        row("PASS", figure, numbers)


@pytest.mark.row("ddp 1 rank self time")
def test_f_ddp_one_rank_shim_time_per_step(gs, row, tools):
    # The DDP example on one GPU (world size 1; two ranks cannot share a GPU under NCCL): every
    # traced call a rank of the two-GPU job makes (its GEMMs, bucket copies, in-place bucket
    # all-reduces with their send and recv fingerprints), without the time a second rank adds
    # to the step: the shim's share of the step is the two-GPU job's or more, measured where only
    # one GPU is lent (group o judges that job when two are). Judged by the shim's time per
    # step as the TP job is: PASS within 1%, KNOWN over it (README, Known limits), FAIL above
    # gpu_suite.SELF_LIMIT_PCT. One set of 6 turns, one LOCKSTEP_DEBUG run: about 80 s.
    gpu_suite.broad_overhead(gs, row, "ddp", 1, "self", sets=1, chunks=6)


@pytest.mark.row("state hook parts")
def test_f_state_hook_parts_under_the_shim(gs, row, tools):
    """The PyTorch state hook's Python by part (bench/overhead/hook_parts.py) on the launch-bound
    model, under the shim at broad: what each piece of the hook's step costs in a warm loop
    (the job's step runs it cold: the launch-bound row's "python state hook" is that). Shown,
    not judged; FAIL when the hook did not run traced."""
    row.need(40)
    found = gpu_suite.traced_bench(gs, row, "hook-parts", 120, "broad", "hook_parts.py")
    if found is None:
        return
    ns = found["ns_per_call"]
    us = {name: ns.get(name, float("nan")) / 1e3 for name in (
        "whole hook", "pointers (as the hook reads them)", "pointers (t.data_ptr() each)",
        "current stream (as the hook reads it)", "current_stream(device).cuda_stream",
        "state call (ctypes + shim)", "steady step (C)")}
    steady = (f"steady step in C {us['steady step (C)']:.1f} us" if "steady step (C)" in ns
              else "no steady step in C (lockstep._state_hook not built)")
    row("PASS", f"{found['parameters']} parameters: whole hook {us['whole hook']:.1f} us, "
                f"{steady}, "
                f"pointers {us['pointers (as the hook reads them)']:.1f} us "
                f"(t.data_ptr() {us['pointers (t.data_ptr() each)']:.1f}), stream "
                f"{us['current stream (as the hook reads it)']:.1f} us (current_stream "
                f"{us['current_stream(device).cuda_stream']:.1f}), state call "
                f"{us['state call (ctypes + shim)']:.1f} us", found)


@pytest.mark.row("address repeats")
def test_f_address_repeats_per_allocator(gs, row, tools):
    """How many of the unseen job's ops pass the same addresses as in the step before
    (bench/overhead/address_repeats.py, untraced, on each allocator): the most a cache of
    repeating launches' plans could hit, on full's cudaMallocAsync against the caching allocator.
    Shown, not judged; FAIL when the bench failed."""
    row.need(60)
    run, found = gpu_suite.bench_json(gs, "address-repeats", 240, "address_repeats.py")
    if run.rc != 0 or found is None or not found.get("shares"):
        row("FAIL", f"rc {run.rc}: {run.last_err()}")
        return
    parts = [f"{allocator} {s['anywhere_pct']:.1f}% (same index {s['same_index_pct']:.1f}%)"
             for allocator, s in found["shares"].items() if s.get("anywhere_pct") is not None]
    row("PASS", "ops whose addresses repeat the step before's (median from step 3): "
                + ", ".join(parts), found)


@pytest.mark.row("launch cost")
def test_f_launch_cost_per_level(gs, row):
    """Per-launch cost on the GPU at each level (one stream, back-to-back launches of a small
    kernel): what a launch-bound job pays per kernel; full with and without merged hash
    launches. Shown, not judged."""
    bench = os.path.join(gs.config.build, "bench", "collectors", "gpu_launch_bench")
    if not os.access(bench, os.X_OK) or not gs.have_lockstep():
        row.skip(f"needs {bench} and {gs.config.lockstep}")
    row.need(60)
    run = gs.run("launch-cost", 120, [os.path.join(gpu_suite.ROOT, "bench", "collectors",
                                                   "gpu_launch_bench.sh"), 20000],
                 env={"BUILD": gs.config.build}, libs=True)
    # "mode launches N host_us_per_launch H done_us_per_launch D" -> "mode D"
    found = re.findall(r"^(\S+) +launches \S+ \S+ (\S+) \S+ (\S+)", run.text(), re.M)
    figure = ", ".join(f"{mode} {done}" for mode, _, done in found)
    numbers = {"us_per_launch": [{"mode": m, "host_us": float(h), "done_us": float(d)}
                                 for m, h, d in found]}
    if run.rc == 0 and "full-unmerged" in figure:
        row("PASS", f"us/launch: {figure}", numbers)
    else:
        row("FAIL", f"rc {run.rc}: {figure or 'no output'}")
