"""Group j: JAX/XLA as a client (issue #28), and a Hugging Face Trainer job with no change.

examples/jax/train_jax.py: a jitted MLP loop, deterministic XLA flags by default, each step in
jax.profiler.StepTraceAnnotation (numbered steps through lockstep's JAX hook), compiled before
step 1 (compilation and autotuning are the set-up phase); --plant-step S plants a float
scatter-add with colliding indices; --autotune leaves XLA's autotuner on.
examples/hf/train_hf.py: transformers.Trainer on a GPT-2 from a config, full_determinism.

Each row prints the line of the report it checked. Skips without JAX (or transformers) with a
GPU in PYTHON."""

import os
import re

import pytest

import gpu_suite

STEPS = 6
PLANT_STEP = 3
JAX = os.path.join(gpu_suite.ROOT, "examples", "jax", "train_jax.py")
HF = os.path.join(gpu_suite.ROOT, "examples", "hf", "train_hf.py")
pytestmark = pytest.mark.gpu


def passed(line):
    return line.startswith("PASS")


def figure(line):
    return line[6:] if passed(line) else line


@pytest.fixture(scope="module")
def jax_job(gs):
    if not gs.have_jax():
        pytest.skip(f"no JAX with a GPU in {gs.config.py}")
    if not gs.have_lockstep():
        pytest.skip(f"no {gs.config.lockstep}")
    return [gs.config.py, JAX, "--steps", STEPS]


@pytest.fixture(scope="module")
def jax_untraced(gs, jax_job):
    return gs.untraced("jax-untraced", 240, jax_job)


@pytest.mark.row("jax untraced")
def test_j_untraced_job_prints_its_losses(gs, row, jax_untraced):
    last = jax_untraced.first(rf"^step {STEPS} loss ")
    row("PASS" if jax_untraced.rc == 0 and last else "FAIL",
        f"rc {jax_untraced.rc}; {last or jax_untraced.last_err()}")


@pytest.mark.row("jax det {level}")
@pytest.mark.parametrize("level", ["broad", "full"])
def test_j_deterministic_job_is_identical_and_its_losses_untouched(gs, row, jax_job,
                                                                   jax_untraced, level):
    """Twice at the level: the diff says identical (steps paired by the annotations' numbers,
    the set-up apart), and the losses traced are the untraced run's, bit for bit."""
    row.need(150)
    one, two = gs.pair(f"jax-det-{level}", level, 300, jax_job)
    if one.rc or two.rc:
        row("FAIL", f"job exit {one.rc}/{two.rc}: {one.last_err(60)}")
        return
    report = gs.diff(f"jax-det-{level}-diff", one.name, two.name)
    verdict = gs.check_diff(report.out, "--expect", "identical")
    losses = gs.same_losses(jax_untraced.out, one.out)
    # Each loss is the metric of its own step (the copy streams XLA alternates between wait
    # on the program's event: collectors/stream_steps.h).
    _, steps = gs.helper("metrics_match.py", gs.config.lockstep, one.trace, one.out, "--same-step")
    note = one.first(r"JAX/XLA allocator", 60, stderr=True) if level == "full" else ""
    ok = (report.rc == 0 and passed(verdict) and passed(losses) and passed(steps)
          and (level != "full" or note))
    row("PASS" if ok else "FAIL",
        f"diff {report.rc}; {figure(verdict)}; losses vs untraced: {figure(losses)}; "
        f"{figure(steps)}" + (f"; {note or 'no allocator note on stderr'}" if level == "full" else ""))


@pytest.mark.row("jax plant hunt")
def test_j_hunt_names_the_planted_scatter_at_its_first_step(gs, row, jax_job):
    """The planted scatter-add runs from step PLANT_STEP: hunt's full-level window names its
    fusion kernel as the origin there (the job's step number)."""
    row.need(240)
    hunt = gs.run("jax-hunt", 480, [gs.config.lockstep, "hunt", "-o", gs.path("jax-hunt"),
                                    "--json", "--", *jax_job, "--plant-step", PLANT_STEP])
    verdict = gs.check_diff(hunt.out, "--expect", "divergent", "--job-step", PLANT_STEP,
                            "--classification", "origin", "--name", "(?i)scatter")
    windows = "; ".join(re.findall(r"^(?:stage|window)[^\n]{0,90}", hunt.err_text(), re.M)[:4])
    row("PASS" if hunt.rc == 1 and passed(verdict) else "FAIL",
        f"{figure(verdict)}; {windows}")


@pytest.mark.row("jax autotune first")
def test_j_autotuning_difference_opens_the_report(gs, row, jax_job):
    """With XLA's autotuner on, two runs may choose other GEMM algorithms or kernel
    configurations: the report's first finding is that, with both choices and the fix."""
    row.need(150)
    one, two = gs.pair("jax-autotune", "broad", 300, jax_job + ["--autotune"])
    if one.rc or two.rc:
        row("FAIL", f"job exit {one.rc}/{two.rc}: {one.last_err(60)}")
        return
    text = gs.run("jax-autotune-diff", 120, [gs.config.lockstep, "diff", one.trace, two.trace])
    lines = text.text().splitlines()
    findings = [i for i, line in enumerate(lines)
                if re.match(r"^(autotune|metric|state|earlier|culprit|structural|rank)\b", line)]
    if text.rc == 0 and not findings:
        row.skip("autotuning chose alike in both runs: nothing to report")
    autotune = next((i for i, line in enumerate(lines) if line.startswith("autotune")), None)
    fix = next((line.strip() for line in lines if line.strip().startswith("fix: ")), "")
    ok = autotune is not None and findings and findings[0] == autotune and "autotune_level" in fix
    shown = lines[autotune] if autotune is not None else f"no autotune line (diff {text.rc})"
    choice = lines[autotune + 1].strip() if autotune is not None and autotune + 1 < len(lines) \
        else ""
    row("PASS" if ok else "FAIL", f"{shown[:90]}; {choice[:100]}; {fix[:60]}")


@pytest.mark.row("coverage jax")
def test_j_every_kernel_of_the_jax_job_is_accounted_for(gs, row, jax_job):
    """LOCKSTEP_VALIDATE=1: every kernel XLA ran (its fusions, cuBLASLt's, command buffers'
    nodes) was traced."""
    row.need(90)
    run = gs.traced("validate-jax", "broad", 300, jax_job, env={"LOCKSTEP_VALIDATE": "1"})
    rc, line = gs.helper("coverage.py", run.trace)
    row("PASS" if rc == 0 else "FAIL", line.replace("PASS: ", "", 1).replace("FAIL: ", "", 1))


@pytest.fixture(scope="module")
def hf_job(gs):
    if not gs.have_torch():
        pytest.skip(f"no torch with CUDA in {gs.config.py}")
    if not gs.have_lockstep():
        pytest.skip(f"no {gs.config.lockstep}")
    probe = gs.run("hf-probe", 120, [gs.config.py, "-c", "import transformers"])
    if probe.rc != 0:
        pytest.skip(f"no transformers in {gs.config.py}")
    return [gs.config.py, HF, "--steps", 8]


@pytest.mark.row("hf det {level}")
@pytest.mark.parametrize("level", ["broad", "full"])
def test_j_trainer_job_is_identical_with_no_change(gs, row, hf_job, level):
    row.need(150)
    untraced = gs.untraced(f"hf-untraced-{level}", 240, hf_job)
    one, two = gs.pair(f"hf-det-{level}", level, 300, hf_job)
    if one.rc or two.rc or untraced.rc:
        row("FAIL", f"job exit {one.rc}/{two.rc} (untraced {untraced.rc}): {one.last_err(60)}")
        return
    report = gs.diff(f"hf-det-{level}-diff", one.name, two.name)
    verdict = gs.check_diff(report.out, "--expect", "identical")
    losses = gs.same_losses(untraced.out, one.out)
    ok = report.rc == 0 and passed(verdict) and passed(losses)
    row("PASS" if ok else "FAIL",
        f"diff {report.rc}; {figure(verdict)}; losses vs untraced: {figure(losses)}")
