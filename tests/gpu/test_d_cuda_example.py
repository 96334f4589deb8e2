"""Group d: examples/cuda (kernels, cuBLASLt block-scaled FP8, a planted atomicAdd reduction and
a planted FP8 scale): deterministic pairs at every level, plants found, hunt."""

import os
import re
import signal
import subprocess
import time

import pytest

STEPS = 6
PLANT_STEP = 3
ARGS = ["--steps", STEPS, "--block-scaled"]
ATOMIC = "planted_atomic_sum_squares"
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def example(gs):
    """The example's path, after the checks that it and lockstep are there; its untraced run
    (the numbers every traced run is compared with) once."""
    if not os.access(gs.config.cuda_example, os.X_OK):
        pytest.skip(f"no {gs.config.cuda_example}")
    if not gs.have_lockstep():
        pytest.skip(f"no {gs.config.lockstep}")
    return gs.config.cuda_example


@pytest.fixture(scope="module")
def untraced(gs, example):
    return gs.untraced("cuda-untraced", 60, [example, *ARGS])


@pytest.mark.row("cuda untraced")
def test_d_untraced_runs(row, untraced):
    if untraced.rc != 0:
        row("FAIL", f"rc {untraced.rc}: {untraced.last_err()}")
        return
    steps = len(re.findall(r"^step", untraced.text(), re.M))
    gemm = re.search(r"block-scaled FP8 GEMM[^(\n]*", untraced.err_text())
    row("PASS", f"{steps} steps; {gemm.group(0) if gemm else ''}")


@pytest.mark.row("cuda plant varies")
def test_d_planted_atomic_varies_between_runs(gs, row, example):
    probe = gs.untraced("cuda-probe", 60, [example, "--probe-atomic", 16]).first(r"^probe-atomic")
    m = re.match(r"^probe-atomic: (\d+) distinct", probe)
    if m and int(m.group(1)) > 1:
        row("PASS", probe[len("probe-atomic: "):])
    else:
        row("FAIL", probe or "probe failed")


@pytest.mark.row("cuda det {level}")
@pytest.mark.parametrize("level", ["off", "metrics", "broad", "full"])
def test_d_deterministic_pair_is_identical(gs, row, run_pair, diff, example, untraced, level):
    """The deterministic job twice at every level: diff exits 0, numbers identical to
    untraced."""
    row.need(30)
    one, two = run_pair(f"cuda-det-{level}", level, 120, [example, *ARGS])
    if one.rc or two.rc:
        row("FAIL", f"job exit {one.rc}/{two.rc}: {one.last_err(60)}")
        return
    numbers = gs.same_losses(untraced.out, one.out)
    has_trace = any(f.endswith(".lstrace") for _, _, fs in os.walk(one.trace) for f in fs)
    if level == "off" and not has_trace:
        # `off` may write no trace at all: then only the numbers can be checked.
        ok = numbers.startswith("PASS")
        row("PASS" if ok else "FAIL",
            f"no trace; vs untraced: {numbers[6:] if ok else numbers}")
        return
    report = diff(f"cuda-det-{level}-diff", one.name, two.name)
    drc = report.rc
    verdict = gs.check_diff(report.out, "--expect", "identical")
    if drc == 0 and verdict.startswith("PASS") and numbers.startswith("PASS"):
        row("PASS", f"diff 0; {verdict[6:]}; vs untraced: {numbers[6:]}")
    else:
        row("FAIL", f"diff {drc}; {verdict}; vs untraced: {numbers}")
    if level == "metrics":
        # The losses the job printed are Metric records of its trace (issue 5).
        _, line = gs.helper("metrics_match.py", gs.config.lockstep, one.trace, one.out)
        row.add("cuda metrics = printed", "PASS" if line.startswith("PASS") else "FAIL",
                line[6:] if line.startswith("PASS") else line)


@pytest.mark.row("cuda plant atomic")
def test_d_planted_atomic_is_the_origin(gs, row, example):
    """Planted float atomicAdd reduction: two planted runs differ; the origin is that kernel."""
    row.need(30)
    plant = [example, "--steps", STEPS, "--plant", "atomic", "--plant-step", PLANT_STEP]
    gs.traced("cuda-atomic-full-1", "full", 120, plant)
    gs.traced("cuda-atomic-full-2", "full", 120, plant)
    drc = gs.diff("cuda-atomic-diff", "cuda-atomic-full-1", "cuda-atomic-full-2").rc
    verdict = gs.check_diff(gs.path("cuda-atomic-diff.out"), "--expect", "divergent", "--step",
                            PLANT_STEP, "--name", ATOMIC, "--classification", "origin")
    if drc == 1 and verdict.startswith("PASS"):
        row("PASS", verdict[6:])
    else:
        row("FAIL", f"diff {drc}; {verdict}")


SIDE_LINE = re.compile(r"side streams \(LOCKSTEP_SIDE_HASHES\): (\d+) hash launches beside")
HASH_LINE = re.compile(r"hash launches: (\d+) ")


@pytest.mark.row("cuda side hashes")
def test_d_side_hashes_keep_the_pair_identical_and_the_plant_the_origin(gs, row, example,
                                                                        untraced):
    """LOCKSTEP_SIDE_HASHES=1 (experimental, collectors/side_hashes.h): the deterministic pair at
    full is identical and computes the untraced numbers, the planted atomic is still the origin,
    and some hash launches went beside the job's kernels (else nothing was tested)."""
    row.need(60)
    env = {"LOCKSTEP_SIDE_HASHES": "1", "LOCKSTEP_DEBUG": "1"}
    runs = [gs.traced(f"cuda-side-{i}", "full", 120, [example, *ARGS], env=env) for i in (1, 2)]
    if any(r.rc for r in runs):
        row("FAIL", f"job exit {runs[0].rc}/{runs[1].rc}: {runs[0].last_err(60)}")
        return
    numbers = gs.same_losses(untraced.out, runs[0].out)
    report = gs.diff("cuda-side-diff", "cuda-side-1", "cuda-side-2")
    verdict = gs.check_diff(report.out, "--expect", "identical")
    side = SIDE_LINE.search(runs[0].err_text())
    launches = HASH_LINE.search(runs[0].err_text())
    plant = [example, "--steps", STEPS, "--plant", "atomic", "--plant-step", PLANT_STEP]
    for i in (1, 2):
        gs.traced(f"cuda-side-atomic-{i}", "full", 120, plant, env=env)
    prc = gs.diff("cuda-side-atomic-diff", "cuda-side-atomic-1", "cuda-side-atomic-2").rc
    found = gs.check_diff(gs.path("cuda-side-atomic-diff.out"), "--expect", "divergent",
                          "--step", PLANT_STEP, "--name", ATOMIC, "--classification", "origin")
    beside = f"{side.group(1) if side else '?'} of {launches.group(1) if launches else '?'}"
    ok = (report.rc == 0 and verdict.startswith("PASS") and numbers.startswith("PASS")
          and prc == 1 and found.startswith("PASS") and side is not None
          and int(side.group(1)) > 0)
    row("PASS" if ok else "FAIL",
        f"{beside} hash launches beside the kernels; pair: diff {report.rc}, {verdict[6:]}; "
        f"vs untraced: {numbers[6:]}; plant: diff {prc}, {found[6:] if prc == 1 else found}")


@pytest.mark.row("cuda plant scale")
def test_d_planted_fp8_scale_names_the_gemm_input(gs, row, example):
    """A planted run against a clean one: the FP8 GEMM's A_scale shows up."""
    if not gs.fits(20) or not os.path.isdir(gs.path("cuda-det-full-1")):
        row.skip("time budget or no clean full run")
    gs.traced("cuda-scale-full", "full", 120, [example, *ARGS, "--plant", "scale",
                                               "--plant-step", PLANT_STEP])
    drc = gs.diff("cuda-scale-diff", "cuda-det-full-1", "cuda-scale-full").rc
    verdict = gs.check_diff(gs.path("cuda-scale-diff.out"), "--expect", "divergent", "--step",
                            PLANT_STEP, "--buffer-label", "A_scale", "--buffer-op",
                            "cublasLtMatmul")
    if drc == 1 and verdict.startswith("PASS"):
        row("PASS", verdict[6:])
    else:
        row("FAIL", f"diff {drc}; {verdict}")


@pytest.mark.row("cuda hunt")
def test_d_hunt_finds_the_plant_without_hints(gs, row, example):
    row.need(40)
    hunt = gs.run("cuda-hunt", 240, [gs.config.lockstep, "hunt", "-o", gs.path("cuda-hunt"),
                                     "--json", "--", example, "--steps", STEPS, "--plant",
                                     "atomic", "--plant-step", PLANT_STEP], libs=True)
    verdict = gs.check_diff(hunt.out, "--expect", "divergent", "--step", PLANT_STEP, "--name",
                            ATOMIC, "--classification", "origin")
    if hunt.rc == 1 and verdict.startswith("PASS"):
        row("PASS", verdict[6:])
    else:
        row("FAIL", f"hunt {hunt.rc}; {verdict}")


@pytest.fixture(scope="module", autouse=True)
def sample_traces(gs):
    """After the group: small real traces for examples/ (issue 6), a deterministic pair and a
    diverging pair, as OUT/sample-traces.tar.gz."""
    yield
    samples = ["cuda-det-full-1", "cuda-det-full-2", "cuda-atomic-full-1", "cuda-atomic-full-2"]
    if not all(os.path.isdir(gs.path(s)) for s in samples):
        return
    size = sum(os.path.getsize(os.path.join(d, f)) for s in samples
               for d, _, fs in os.walk(gs.path(s)) for f in fs)
    if size < 50 * 1024 * 1024:
        tar = os.path.join(gs.config.out, "sample-traces.tar.gz")
        subprocess.run(["tar", "-czf", tar, "-C", gs.work, *samples], check=False)
        gs.say(f"sample traces: {tar} ({size} bytes before compression)")


def _killed_run(gs, name, example, sig):
    """`lockstep run` of a long job, killed with `sig` (the whole process group: the CLI and
    the job) once its trace has some steps on disk. Returns the trace folder."""
    trace = gs.path(name)
    cmd = [str(gs.config.lockstep), "run", "-o", trace, "--level", "broad", "--",
           str(example), "--steps", "100000"]
    env = dict(os.environ)
    if gs.extra_libs:
        env["LD_LIBRARY_PATH"] = ":".join(gs.extra_libs + [env.get("LD_LIBRARY_PATH", "")])
    with open(gs.path(name + ".err"), "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            sizes = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(trace)
                     for f in fs]
            if sizes and max(sizes) > 64 * 1024:  # the trace file (a stand-in's: its stdout)
                break
            time.sleep(0.1)
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            pass
        proc.wait(timeout=30)
    return trace


@pytest.mark.row("cuda verify")
def test_d_verify_certifies_a_finished_run_and_never_a_killed_one(gs, row, example):
    """A clean run is CERTIFIED COMPLETE; a run killed by SIGTERM (End block: signal 15, not
    clean) or SIGKILL (no End block) is not, and says how far it is readable (issue #32)."""
    row.need(40)
    if not os.path.isdir(gs.path("cuda-det-full-1")):
        row.skip("no clean full run (cuda det full)")
    lockstep = str(gs.config.lockstep)
    clean = gs.run("cuda-verify-clean", 60, [lockstep, "verify", gs.path("cuda-det-full-1")])
    figures = []
    ok = clean.rc == 0 and "CERTIFIED COMPLETE" in clean.text()
    figures.append(f"clean rc {clean.rc}")
    for sig, expect in ((signal.SIGTERM, f"signal {int(signal.SIGTERM)}"),
                        (signal.SIGKILL, "no end record")):
        trace = _killed_run(gs, f"cuda-killed-{sig.name}", example, sig)
        check = gs.run(f"cuda-verify-{sig.name}", 60, [lockstep, "verify", trace])
        said = check.text() + check.err_text()
        prefix = re.search(r"readable prefix up to step \d+|no complete step", said)
        # SIGTERM: the shim's handler seals the trace ("signal 15", not clean) unless the
        # writer was busy at that instant (then no end record); SIGKILL: never an end record.
        said_why = next((w for w in (expect, "did not finish") if w in said), "")
        ok = ok and check.rc == 2 and "NOT CERTIFIED" in said and bool(said_why)
        figures.append(f"{sig.name} rc {check.rc}: {said_why or 'no reason given'}"
                       f"{', ' + prefix.group(0) if prefix else ''}")
    row("PASS" if ok else "FAIL", "; ".join(figures))
