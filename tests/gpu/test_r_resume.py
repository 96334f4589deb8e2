"""Group r: the article's other uses (issue #31). A resume certified bit-exact for the steps after
it, and a resume that forgets the optimizer's state named at the first op after the restore
(`lockstep check --resume-at K` on examples/pytorch/train_gpt.py); a host-side FP8 scale changed
in run B classified as a host input at its step, with the GEMM that used it a receiver
(examples/cuda --scales copy --plant scale); the one-run audit of a clean run on the H200.

The audit's two-GPU demonstration (a flipped bit of one rank's reduced gradient) needs a second
GPU: NCCL refuses two ranks on one device, so it is not here."""

import json
import os
import re

import pytest

import gpu_suite

STEPS = 8
RESUME_AT = 4
GPT = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "train_gpt.py")
CUDA_ARGS = ["--steps", 6, "--scales", "copy"]
SCALE_STEP = 3
pytestmark = pytest.mark.gpu


def report_of(run):
    """The JSON document a `--json` command printed, or {} (the row then says what it saw)."""
    try:
        with open(run.out) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return {}


def losses(path):
    """{job step: loss_hex} of a train_gpt.py output."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return {}
    return {int(m.group(1)): m.group(2)
            for m in re.finditer(r"^step (\d+) loss \S+ loss_hex (\S+)", text, re.M)}


def describe(div):
    if not div:
        return "no divergence"
    buf = div.get("buffer") or {}
    return (f"job step {div.get('job_step', '?')} (trace {div.get('step')}) "
            f"{div.get('classification')} {div.get('kind')} {str(div.get('name'))[:50]}"
            f"{' ' + str(buf.get('label')) if buf.get('label') else ''}")


@pytest.fixture(scope="module")
def gpt(gs):
    if not gs.have_torch():
        pytest.skip(f"no torch with CUDA in {gs.config.py}")
    if not gs.have_lockstep():
        pytest.skip(f"no {gs.config.lockstep}")
    return [gs.config.py, GPT, "--steps", STEPS]


def resume_check(gs, name, cmd, level):
    return gs.run(name, 300, [gs.config.lockstep, "check", "--resume-at", RESUME_AT, "--json",
                              "--level", level, "-o", gs.path(name), "--", *cmd], libs=True)


@pytest.mark.row("resume bit-exact")
def test_r_a_resumed_run_is_certified_bit_exact_for_the_steps_after_the_resume(gs, row, gpt):
    row.need(90)
    check = resume_check(gs, "resume-full", gpt, "full")
    doc = report_of(check)
    resume = (doc.get("alignment") or {}).get("resume") or {}
    straight = losses(os.path.join(gs.path("resume-full"), "straight", "job.log"))
    resumed = losses(os.path.join(gs.path("resume-full"), "resumed", "job.log"))
    common = sorted(set(straight) & set(resumed))
    same = bool(common) and all(straight[s] == resumed[s] for s in common)
    figure = (f"check {check.rc}: {resume.get('verdict') or check.last_err(80)}; printed losses "
              f"of job steps {common[0] if common else '-'}-{common[-1] if common else '-'} "
              f"{'bit-identical' if same else 'DIFFER'}; {doc.get('stats', {}).get('records_compared', 0)} records compared")
    ok = (check.rc == 0 and resume.get("bit_exact") is True and same
          and common and common[0] == RESUME_AT and doc.get("verdict") == "identical")
    row("PASS" if ok else "FAIL", figure)


@pytest.mark.row("resume forgets optimizer")
def test_r_a_resume_without_the_optimizer_state_is_named_after_the_restore(gs, row, gpt):
    row.need(90)
    check = resume_check(gs, "resume-forget", gpt + ["--forget-optimizer"], "full")
    doc = report_of(check)
    resume = (doc.get("alignment") or {}).get("resume") or {}
    first = doc.get("first_divergence") or {}
    job_step = first.get("job_step")
    figure = f"check {check.rc}: {resume.get('verdict') or check.last_err(80)}; first: {describe(first)}"
    # Without its loaded state AdamW creates it afresh at the first step after the restore (a
    # zero fill only run B makes: structural), or the loaded values differ (host input, origin
    # or receiver): either way named at the resume step.
    ok = (check.rc == 1 and resume.get("bit_exact") is False and job_step == RESUME_AT
          and first.get("classification") in ("host_input", "origin", "receiver", "structural"))
    row("PASS" if ok else "FAIL", figure)


@pytest.fixture(scope="module")
def cuda(gs):
    if not os.access(gs.config.cuda_example, os.X_OK):
        pytest.skip(f"no {gs.config.cuda_example}")
    if not gs.have_lockstep():
        pytest.skip(f"no {gs.config.lockstep}")
    return gs.config.cuda_example


@pytest.mark.row("host scale = host input")
def test_r_a_host_side_fp8_scale_is_a_host_input_and_its_gemm_a_receiver(gs, row, cuda):
    row.need(40)
    a = gs.traced("scale-copy-a", "full", 120, [cuda, *CUDA_ARGS])
    b = gs.traced("scale-copy-b", "full", 120, [cuda, *CUDA_ARGS, "--plant", "scale",
                                                "--plant-step", SCALE_STEP])
    if a.rc or b.rc:
        row("FAIL", f"job exit {a.rc}/{b.rc}: {b.last_err(60)}")
        return
    report = gs.diff("scale-copy-diff", "scale-copy-a", "scale-copy-b")
    doc = report_of(report)
    first = doc.get("first_divergence") or {}
    gemm = next((d for d in doc.get("culprit_receivers", [])
                 if d.get("kind") == "gemm" and "A_scale" in str((d.get("buffer") or {}).get("label"))),
                None)
    text = gs.run("scale-copy-text", 60, [gs.config.lockstep, "diff", gs.path("scale-copy-a"),
                                          gs.path("scale-copy-b")]).text()
    host_line = next((line.strip() for line in text.splitlines() if "host input:" in line), "")
    gemm_line = next((line.strip() for line in text.splitlines()
                      if line.strip().startswith("then") and "gemm" in line), "no receiver GEMM")
    figure = f"first: {describe(first)}; {host_line[:100]}; {gemm_line[:110]}"
    ok = (report.rc == 1 and first.get("classification") == "host_input"
          and first.get("step") == SCALE_STEP and "emcpy" in str(first.get("name"))
          and gemm is not None)
    row("PASS" if ok else "FAIL", figure)


@pytest.mark.row("audit clean run")
def test_r_the_audit_of_a_clean_run_on_the_gpu_is_clean(gs, row, cuda):
    row.need(30)
    run = gs.traced("audit-clean", "full", 120, [cuda, *CUDA_ARGS], run_args=["--audit"])
    audit = gs.run("audit-clean-json", 60, [gs.config.lockstep, "audit", gs.path("audit-clean"),
                                            "--json"])
    doc = report_of(audit)
    figure = (f"run --audit {run.rc}, audit {audit.rc}: verdict {doc.get('verdict')}; "
              f"{run.first(r'audit', 100, stderr=True) or run.first(r'audit', 100) or ''}")
    ok = run.rc == 0 and audit.rc == 0 and doc.get("verdict") == "clean"
    row("PASS" if ok else "FAIL", figure)
