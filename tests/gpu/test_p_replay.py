"""Group p: the replay verdict (issue #30). `lockstep hunt`'s stage 4 reruns the job at full
within the diverging step and, at the culprit's launch, has the shim snapshot every region the
launch may read or write, relaunch the same kernel 16 more times from the snapshot, fingerprint
each output and put back what the job's own launch left (collectors/replay.h). What the H200 must
show: 'nondeterministic on identical inputs' with the count, and the mechanism line, for the
planted atomic of examples/cuda, the planted index_add_ of the GPT example and a Triton kernel
with tl.atomic_add (examples/pytorch/triton_atomic.py); 'deterministic' for a kernel that only
received the difference; and the job's losses after a replay bit-identical to a run without it."""

import json
import os
import re

import pytest

import gpu_suite

CUDA_PLANT = ["--steps", 6, "--plant", "atomic", "--plant-step", 3]
CUDA_DET = ["--steps", 6]
GPT = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "train_gpt.py")
GPT_PLANT = ["--steps", 8, "--plant-step", 5, "--plant-module", "blocks.1.mlp",
             "--plant-phase", "forward"]
TRITON = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "triton_atomic.py")
TRITON_PLANT = ["--steps", 5, "--plant-step", 3]
SHOW_KERNEL = re.compile(r"^r(\d+) step (\d+) seq \d+ stream (\d+) thread \d+ kernel (.*?) grid_x=")
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def lockstep(gs):
    if not gs.have_lockstep():
        pytest.skip(f"no {gs.config.lockstep}")
    return str(gs.config.lockstep)


@pytest.fixture(scope="module")
def cuda_example(gs, lockstep):
    if not os.access(gs.config.cuda_example, os.X_OK):
        pytest.skip(f"no {gs.config.cuda_example}")
    return str(gs.config.cuda_example)


@pytest.fixture(scope="module")
def torch_py(gs, lockstep):
    if not gs.have_torch():
        pytest.skip(f"no torch with CUDA in {gs.config.py}")
    return gs.config.py


def document(run):
    try:
        return json.loads(run.text() or "{}")
    except ValueError:
        return {}


def hunt_row(gs, row, name, cmd, kernel, limit):
    """hunt --json; PASS when the culprit matches `kernel`, its replay verdict is
    nondeterministic with a count, and a mechanism line stands under it."""
    hunt = gs.run(name, limit, [gs.config.lockstep, "hunt", "--json", "-o", gs.path(name), "--",
                                *cmd], libs=True)
    doc = document(hunt)
    culprit = doc.get("culprit") or {}
    replay = doc.get("culprit_replay") or {}
    mechanism = culprit.get("mechanism") or {}
    ok = (hunt.rc == 1 and re.search(kernel, culprit.get("name", "")) is not None
          and replay.get("verdict") == "nondeterministic" and replay.get("differing", 0) > 0
          and bool(mechanism.get("id")))
    stage4 = hunt.first(r"^stage 4 .*", stderr=True)
    figure = (f"{culprit.get('name_short', culprit.get('name', '-'))} step {culprit.get('step')}: "
              f"{replay.get('text', 'no replay verdict')}; mechanism {mechanism.get('id', '-')}")
    if not ok:
        figure = f"hunt {hunt.rc}: {figure}; {stage4 or hunt.last_err()}"
    row("PASS" if ok else "FAIL", figure,
        {"replays": replay.get("replays"), "differing": replay.get("differing"),
         "distinct": replay.get("distinct"), "region_bytes": replay.get("region_bytes")})
    return doc


@pytest.mark.row("replay atomic")
def test_p_replay_of_the_planted_atomic_is_nondeterministic(gs, row, cuda_example):
    row.need(60)
    hunt_row(gs, row, "replay-atomic", [cuda_example, *CUDA_PLANT], r"planted_atomic_sum_squares",
             240)


@pytest.mark.row("replay index_add")
def test_p_replay_of_the_planted_index_add_is_nondeterministic(gs, row, torch_py):
    row.need(150)
    hunt_row(gs, row, "replay-index-add", [torch_py, GPT, *GPT_PLANT], r"index(Func|_add|Add)", 330)


@pytest.mark.row("replay triton atomic")
def test_p_replay_of_a_triton_atomic_add_is_nondeterministic(gs, row, torch_py):
    row.need(120)
    hunt_row(gs, row, "replay-triton", [torch_py, TRITON, *TRITON_PLANT], r"bin_rows_atomic_add",
             300)


def kernel_op(gs, trace, step, pattern):
    """STEP:STREAM:kernel:NAME:1 of the first kernel in `step` of rank 0 whose full name matches
    `pattern` (lockstep show --verbose), or None."""
    shown = gs.run(os.path.basename(trace) + "-show", 60,
                   [gs.config.lockstep, "show", trace, "--verbose", "--rank", 0, "--step", step])
    for line in shown.text().splitlines():
        m = SHOW_KERNEL.match(line)
        if m and re.search(pattern, m.group(4)):
            return f"{step}:{m.group(3)}:kernel:{m.group(4)}:1"
    return None


def replay(gs, name, op, cmd, limit=120):
    return gs.run(name, limit, [gs.config.lockstep, "replay", "--json", "--op", op, "-o",
                                gs.path(name), "--", *cmd], libs=True)


@pytest.mark.row("replay receiver deterministic")
def test_p_replay_of_a_kernel_that_only_received_the_difference_is_deterministic(
        gs, row, cuda_example):
    """The kernel after the planted atomic reads its differing sum (rms_normalize_bf16): it
    receives the difference, and replayed on its own inputs it is deterministic."""
    row.need(30)
    traced = gs.traced("replay-receiver-broad", "broad", 60, [cuda_example, *CUDA_PLANT])
    op = kernel_op(gs, gs.path("replay-receiver-broad"), 3, r"^rms_normalize_bf16\(")
    if traced.rc or op is None:
        row("FAIL", f"job exit {traced.rc}; receiver op {op}: {traced.last_err()}")
        return
    run = replay(gs, "replay-receiver", op, [cuda_example, *CUDA_PLANT])
    doc = document(run)
    ok = run.rc == 0 and doc.get("verdict") == "deterministic" and doc.get("compared") == 16
    row("PASS" if ok else "FAIL",
        f"rms_normalize_bf16 step 3: {doc.get('text', run.last_err())}",
        {"replays": doc.get("replays"), "differing": doc.get("differing")})


@pytest.mark.row("replay losses untouched")
def test_p_the_jobs_losses_after_a_replay_are_those_of_a_run_without_it(gs, row, cuda_example):
    """Replaying sgd_update (an in-place update of the weights) 16 times at step 3: had the shim
    not put back what the job's own launch left, the weights and every later loss would differ."""
    row.need(40)
    untraced = gs.untraced("replay-losses-untraced", 60, [cuda_example, *CUDA_DET])
    traced = gs.traced("replay-losses-broad", "broad", 60, [cuda_example, *CUDA_DET])
    op = kernel_op(gs, gs.path("replay-losses-broad"), 3, r"^sgd_update\(")
    if untraced.rc or traced.rc or op is None:
        row("FAIL", f"job exit {untraced.rc}/{traced.rc}; op {op}: {traced.last_err()}")
        return
    # --json keeps the job's output in job.log, which holds its step lines.
    run = replay(gs, "replay-losses", op, [cuda_example, *CUDA_DET])
    doc = document(run)
    log = os.path.join(gs.path("replay-losses"), "job.log")
    losses = gs.same_losses(untraced.out, log) if os.path.exists(log) else "FAIL: no job.log"
    ok = (run.rc == 0 and doc.get("verdict") == "deterministic" and doc.get("compared") == 16
          and losses.startswith("PASS"))
    row("PASS" if ok else "FAIL",
        f"sgd_update step 3 replayed {doc.get('compared', 0)} times: losses {losses}; "
        f"{doc.get('text', run.last_err())}")
