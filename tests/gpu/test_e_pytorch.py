"""Group e: examples/pytorch/train_gpt.py: deterministic pairs, a planted nondeterministic
index_add found (also inside a CUDA graph), hunt, torch.compile and CUDA graphs."""

import os
import re

import pytest

import gpu_suite

STEPS = 12
PLANT_STEP = 5
PLANT = ["--plant-step", PLANT_STEP, "--plant-layer", 1]
INDEX_KERNEL = "index(Func|_add|Add)"
GPT = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "train_gpt.py")
HELD = os.path.join(gpu_suite.ROOT, "tests", "gpu", "jobs", "held_hashes.py")
HELD_WAITS = re.compile(r"other streams made to wait on it (\d+)")
LEVELS = os.environ.get("GPT_DET_LEVELS", "broad full").split()
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpt(gs):
    """The job's command line, after the checks that torch and lockstep are there."""
    if not gs.have_torch():
        pytest.skip(f"no torch with CUDA in {gs.config.py}")
    if not gs.have_lockstep():
        pytest.skip(f"no {gs.config.lockstep}")
    return [gs.config.py, GPT, "--steps", STEPS]


@pytest.fixture(scope="module")
def untraced(gs, gpt):
    return gs.untraced("gpt-untraced", 180, gpt)


def passed(line):
    return line.startswith("PASS")


@pytest.mark.row("gpt untraced")
def test_e_untraced_runs(row, untraced):
    if untraced.rc != 0:
        row("FAIL", f"rc {untraced.rc}: {untraced.last_err()}")
        return
    steps = [line for line in untraced.text().splitlines() if line.startswith("step")]
    last = " ".join(steps[-1].split()[2:4]) if steps else ""
    row("PASS", f"{len(steps)} steps, last {last}")


@pytest.mark.row("gpt plant varies")
def test_e_planted_op_varies_between_runs(gs, row, gpt):
    probe = gs.untraced("gpt-probe", 120, [gs.config.py, GPT, "--probe-plant", 8])
    line = probe.first(r"^probe-plant")
    m = re.match(r"^probe-plant: (\d+) distinct", line)
    if m and int(m.group(1)) > 1:
        row("PASS", line[len("probe-plant: "):])
    else:
        row("FAIL", line or "probe failed")


@pytest.mark.row("gpt det {level}")
@pytest.mark.parametrize("level", LEVELS)
def test_e_deterministic_pair_is_identical(gs, row, run_pair, diff, gpt, untraced, level):
    row.need(60)
    one, two = run_pair(f"gpt-det-{level}", level, 240, gpt)
    if one.rc or two.rc:
        row("FAIL", f"job exit {one.rc}/{two.rc}: {one.last_err(60)}")
        return
    report = diff(f"gpt-det-{level}-diff", one.name, two.name)
    drc = report.rc
    verdict = gs.check_diff(report.out, "--expect", "identical")
    numbers = gs.same_losses(untraced.out, one.out)
    if drc == 0 and passed(verdict) and passed(numbers):
        row("PASS", f"diff 0; {verdict[6:]}; losses vs untraced: {numbers[6:]}")
    else:
        row("FAIL", f"diff {drc}; {verdict}; losses vs untraced: {numbers}")
    if level == "broad":
        # loss.item()'s copies are Metric records holding the printed losses (issue 5).
        _, line = gs.helper("metrics_match.py", gs.config.lockstep, one.trace, one.out)
        row.add("gpt loss.item() = trace", "PASS" if passed(line) else "FAIL",
                line[6:] if passed(line) else line)
    if level == "full" and os.path.isdir(gs.path("gpt-det-broad-1")):
        # Below full a GEMM's fields come from copies of its cuBLASLt objects, read on the
        # writer's thread (collectors/lt_copies.h); at full from the objects: the same fields.
        _, line = gs.helper("gemm_fields_match.py", gs.config.lockstep, gs.path("gpt-det-broad-1"),
                            one.trace)
        row.add("gpt gemm fields broad = full", "PASS" if passed(line) else "FAIL",
                line[6:] if passed(line) else line)


@pytest.mark.row("gpt plant")
def test_e_planted_index_add_is_the_origin(gs, row, gpt):
    row.need(60)
    gs.traced("gpt-plant-1", "full", 240, gpt + PLANT)
    gs.traced("gpt-plant-2", "full", 240, gpt + PLANT)
    varied = gs.same_losses(gs.path("gpt-plant-1.out"), gs.path("gpt-plant-2.out"), "--expect",
                            "differ", "--differ-from-step", PLANT_STEP)
    drc = gs.diff("gpt-plant-diff", "gpt-plant-1", "gpt-plant-2").rc
    verdict = gs.check_diff(gs.path("gpt-plant-diff.out"), "--expect", "divergent", "--step",
                            PLANT_STEP, "--name", INDEX_KERNEL, "--classification", "origin")
    varied_figure = varied.split(": ", 1)[-1]
    if drc == 1 and passed(verdict):
        row("PASS", f"{verdict[6:]}; losses: {varied_figure}")
    else:
        row("FAIL", f"diff {drc}; {verdict}; losses: {varied}")


@pytest.mark.row("gpt hunt")
def test_e_hunt_finds_the_plant_without_hints(gs, row, gpt):
    row.need(90)
    hunt = gs.run("gpt-hunt", 300, [gs.config.lockstep, "hunt", "-o", gs.path("gpt-hunt"),
                                    "--json", "--", *gpt, *PLANT])
    verdict = gs.check_diff(hunt.out, "--expect", "divergent", "--step", PLANT_STEP, "--name",
                            INDEX_KERNEL, "--classification", "origin")
    # Under --json the stages are on stderr: stdout holds the JSON document alone.
    stages = ";".join(re.sub(r" \(.*\)", "", m) for m in
                      re.findall(r"^stage [12][^:]*: [0-9.]* s", hunt.err_text(), re.M))
    if hunt.rc == 1 and passed(verdict):
        row("PASS", f"{verdict[6:]}; {stages}")
    else:
        row("FAIL", f"hunt {hunt.rc}; {verdict}")


@pytest.mark.row("gpt cuda-graph plant")
def test_e_plant_inside_a_cuda_graph_is_the_replay(gs, row, gpt):
    """A nondeterministic op captured into the CUDA graph at step S and replayed: the graph's
    replay at step S is the origin (fingerprints run around every replay)."""
    row.need(90)
    job = gpt + ["--cuda-graph", "--plant-step", PLANT_STEP]
    gs.traced("gpt-graph-plant-1", "full", 240, job)
    gs.traced("gpt-graph-plant-2", "full", 240, job)
    drc = gs.diff("gpt-graph-plant-diff", "gpt-graph-plant-1", "gpt-graph-plant-2").rc
    verdict = gs.check_diff(gs.path("gpt-graph-plant-diff.out"), "--expect", "divergent",
                            "--step", PLANT_STEP, "--name", "^graph$", "--classification",
                            "origin")
    if drc == 1 and passed(verdict):
        row("PASS", verdict[6:])
    else:
        row("FAIL", f"diff {drc}; {verdict}")


@pytest.mark.row("gpt {variant} full")
@pytest.mark.parametrize("variant", ["compile", "cuda-graph"])
def test_e_compiled_and_graphed_pairs_are_identical(gs, row, gpt, variant):
    """torch.compile (Triton) and CUDA graphs: deterministic twice, same losses as untraced."""
    row.need(150)
    job = gpt + [f"--{variant}"]
    untraced = gs.untraced(f"gpt-{variant}-untraced", 240, job)
    one, two = gs.pair(f"gpt-{variant}", "full", 240, job)
    if one.rc or two.rc:
        row("FAIL", f"job exit {one.rc}/{two.rc}: {one.last_err(60)}")
        return
    drc = gs.diff(f"gpt-{variant}-diff", one.name, two.name).rc
    verdict = gs.check_diff(gs.path(f"gpt-{variant}-diff.out"), "--expect", "identical")
    numbers = gs.same_losses(untraced.out, one.out)
    if drc == 0 and passed(verdict) and passed(numbers):
        row("PASS", f"diff 0; losses vs untraced: {numbers[6:]}")
    else:
        row("FAIL", f"diff {drc}; {verdict}; losses vs untraced: {numbers}")


@pytest.mark.row("held hashes other stream")
def test_e_held_hashes_read_before_another_stream_writes(gs, row, gpt):
    """Hashes held across .item() (LOCKSTEP_HOLD_ACROSS_SYNC) and a side stream that overwrites
    their bytes after the synchronize: the multiply's output digests equal those of a run that
    overwrites on the same stream (tests/gpu/jobs/held_hashes.py), and the side stream waited."""
    row.need(60)
    runs = {}
    for mode in ("other-stream", "same-stream"):
        runs[mode] = gs.traced(f"held-{mode}", "full", 120, [gs.config.py, HELD, "--mode", mode],
                               env={"LOCKSTEP_DEBUG": "1"})
    if any(r.rc for r in runs.values()):
        row("FAIL", "job exit " + "/".join(str(r.rc) for r in runs.values()) + ": "
            + runs["other-stream"].last_err(60))
        return
    waits = [int(n) for n in HELD_WAITS.findall(runs["other-stream"].err_text())]
    rc, line = gs.helper("out_digests.py", gs.config.lockstep, runs["other-stream"].trace,
                         runs["same-stream"].trace, "--kernel", "MulFunctor", "--min", 3)
    waited = f"side stream waited {waits[0] if waits else 'never (no counter line)'}"
    if rc == 0 and waits and waits[0] > 0:
        row("PASS", f"{line[6:]}; {waited}")
    else:
        row("FAIL", f"{line}; {waited}")


@pytest.mark.row("nccl profiler 1 rank")
def test_e_nccl_loads_the_shim_as_its_profiler_on_one_rank(gs, row, gpt):
    """NCCL 2.28 loads the shim as its profiler plugin (NCCL_PROFILER_PLUGIN, set by the shim
    when it loads): NCCL's own log says it loaded "lockstep" (v5) and the shim's plugin init ran.
    A one-rank communicator plans no collective (NCCL copies instead: ncclLaunchOneRank), so
    its collective records carry no algorithm: the two-GPU rows of group g check those."""
    row.need(40)
    ddp = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "train_ddp.py")
    job = [gs.config.py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", 1,
           ddp, "--steps", 2]
    run = gs.traced("nccl-one-rank", "broad", 180, job,
                    env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV",
                         "LOCKSTEP_DEBUG": "1"})
    log = run.text() + run.err_text()
    nccl_says = re.search(r"Loaded lockstep \(v5\)|Successfully loaded external profiler plugin "
                          r"\S*liblockstep", log)
    shim_says = "NCCL loaded the shim as its profiler plugin for a communicator of 1" in log
    show = gs.run("nccl-one-rank-show", 60, [gs.config.lockstep, "show", gs.path("nccl-one-rank"),
                                             "--grep", "ncclAllReduce"])
    records = [line for line in show.text().splitlines() if "ncclAllReduce" in line]
    with_algo = sum("nccl_algo=" in line for line in records)
    figure = (f"job rc {run.rc}; NCCL: {nccl_says.group(0) if nccl_says else 'no load line'}; "
              f"plugin init: {shim_says}; {len(records)} all-reduce records, {with_algo} with an "
              f"algorithm (one rank: none expected)")
    ok = run.rc == 0 and nccl_says and shim_says and records and with_algo == 0
    row("PASS" if ok else "FAIL", figure)
