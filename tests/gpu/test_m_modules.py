"""Group m: module scopes (issue #29). `lockstep run` names every nn.Module's forward and
backward and the optimizer's step as scopes with no change to the job (python/lockstep/
_module_scopes.py), so that `lockstep hunt` answers with the module and the phase of the op it
found. The job: examples/pytorch/train_gpt.py with the planted index_add_ inside blocks.1.mlp, in
its forward, in its backward, and in the optimizer step (--plant-module, --plant-phase). Also:
a deterministic pair at full with scopes (on by default there) stays identical and its losses
equal the untraced run's (the hooks change no number), the scopes' cost at broad, side by
side with broad without them in one overhead run (target: at most x1.005), and their cost by
part (bench/overhead/scope_parts.py: Python against C)."""

import glob
import os
import re

import pytest

import gpu_suite
from gpu_suite import (fmt, load_overhead, overhead_numbers, overhead_rest, paired_modes,
                       traced_bench)

STEPS = 8
PLANT_STEP = 5
MODULE = "blocks.1.mlp"
INDEX_KERNEL = "index(Func|_add|Add)"
SCOPE_TARGET = 1.005  # issue #29: scopes at most 0.5% over broad without them
SCOPE_LIMIT = 1.10  # above this scopes would burden full and hunt too: FAIL
GPT = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "train_gpt.py")
OVERHEAD = os.path.join(gpu_suite.ROOT, "bench", "overhead", "overhead.py")
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpt(gs):
    if not gs.have_torch():
        pytest.skip(f"no torch with CUDA in {gs.config.py}")
    if not gs.have_lockstep():
        pytest.skip(f"no {gs.config.lockstep}")
    return [gs.config.py, GPT, "--steps", STEPS]


def passed(line):
    return line.startswith("PASS")


def planted(gpt, phase):
    return gpt + ["--plant-step", PLANT_STEP, "--plant-module", MODULE, "--plant-phase", phase]


def scope_line(text):
    """The text report's scope lines ("in scope ...", "scope    rank ..."), for the figure."""
    return "; ".join(m.strip() for m in re.findall(r"^\s*(?:in scope|scope ) .*$", text, re.M))


@pytest.mark.row("modules hunt {phase}")
@pytest.mark.parametrize("phase,scope", [
    ("forward", r"(^| / )blocks\.1\.mlp \(forward\)$"),
    ("backward", r"(^| / )blocks\.1\.mlp \(backward\)$"),
    ("optimizer", r"(^| / )optimizer\.step$"),
])
def test_m_hunt_names_the_module_and_phase_of_the_planted_op(gs, row, gpt, phase, scope):
    row.need(150)
    name = f"modules-hunt-{phase}"
    hunt = gs.run(name, 360, [gs.config.lockstep, "hunt", "-o", gs.path(name), "--json", "--",
                              *planted(gpt, phase)])
    verdict = gs.check_diff(hunt.out, "--expect", "divergent", "--step", PLANT_STEP, "--name",
                            INDEX_KERNEL, "--classification", "origin", "--scope", scope)
    # The text report of the same answer, as a person reads it.
    full = sorted(d for d in os.listdir(gs.path(name)) if d.startswith("full"))
    text = ""
    if len(full) >= 2:
        report = gs.run(f"{name}-text", 120, [gs.config.lockstep, "diff",
                                              os.path.join(gs.path(name), full[-2]),
                                              os.path.join(gs.path(name), full[-1])])
        text = scope_line(report.text())
    if hunt.rc == 1 and passed(verdict):
        row("PASS", f"{verdict[6:]}; text: {text or 'no scope line'}")
    else:
        row("FAIL", f"hunt {hunt.rc}; {verdict}")


@pytest.mark.row("modules det full")
def test_m_scopes_change_no_number(gs, row, gpt):
    """At full the scopes are on by default: two runs are identical, their losses equal the
    untraced run's bit for bit, and the records carry module scopes."""
    row.need(150)
    untraced = gs.untraced("modules-untraced", 180, gpt)
    one, two = gs.pair("modules-det-full", "full", 300, gpt)
    if untraced.rc or one.rc or two.rc:
        row("FAIL", f"job exit {untraced.rc}/{one.rc}/{two.rc}: {one.last_err(60)}")
        return
    report = gs.diff("modules-det-full-diff", one.name, two.name)
    verdict = gs.check_diff(report.out, "--expect", "identical")
    losses = gs.same_losses(untraced.out, one.out)
    shown = gs.run("modules-det-full-show", 60, [gs.config.lockstep, "show", one.trace,
                                                 "--step", 2])
    scoped = re.findall(r" \| scope (.*)$", shown.text(), re.M)
    backward = sum("(backward)" in s for s in scoped)
    ok = report.rc == 0 and passed(verdict) and passed(losses) and backward > 0
    row("PASS" if ok else "FAIL",
        f"diff {report.rc}; {verdict[6:] if passed(verdict) else verdict}; losses {losses}; "
        f"step 2: {len(scoped)} of {len(shown.text().splitlines())} records scoped, {backward} "
        f"in a backward, e.g. {scoped[len(scoped) // 2] if scoped else '-'}")


@pytest.mark.row("modules scope cost broad")
def test_m_scope_cost_at_broad(gs, row, gpt):
    """Broad with and without module scopes, taking turns in one run (overhead.py): their cost
    is the ratio of the two, judged against issue #29's x1.005; they stay off at broad
    (LOCKSTEP_SCOPES=auto) unless this passes."""
    row.need(200)
    path = gs.path("overhead-scopes.json")
    if os.path.exists(path):
        os.unlink(path)
    run = gs.run("overhead-scopes", 420, [
        gs.config.py, OVERHEAD, "--lockstep", gs.config.lockstep, "--python", gs.config.py,
        "--json", path, "--log", gs.log_path, "--sets", 2, "--chunks", 10, "--chunk-steps", 5,
        "--skip", 5, "--levels", "broad-noscopes,broad-scopes", "--size", "gpu-bound"])
    rows = load_overhead(path)
    if run.rc != 0 or not rows or "broad-scopes" not in rows or "broad-noscopes" not in rows:
        row("FAIL", f"rc {run.rc}: {run.last_err()}")
        return
    with_scopes, without = rows["broad-scopes"], rows["broad-noscopes"]
    # Judged by the interval of the paired turns (gpu_suite.paired_modes). Over the target,
    # scopes stay off at broad (that is the rule): KNOWN, named in README's Known limits;
    # FAIL only past SCOPE_LIMIT, where even full and hunt would suffer.
    pair = paired_modes(with_scopes, without, SCOPE_TARGET, SCOPE_LIMIT)
    if pair is None:
        row("FAIL", "no paired turns of broad-scopes and broad-noscopes in overhead.py's JSON")
        return
    result, ratio, (low, high) = pair["result"], pair["ratio"], pair["interval"]
    decision = ("could be on at broad" if result == "PASS" else
                f"off at broad (LOCKSTEP_SCOPES=auto; FAIL above x{SCOPE_LIMIT})")
    row(result,
        f"broad-scopes/broad-noscopes x{ratio:.4f} [{low:.4f}-{high:.4f}] over {pair['turns']} "
        f"paired turns (target x{SCOPE_TARGET}: {decision}); broad-scopes "
        f"x{fmt(with_scopes.get('ratio'), '.3f')}, broad-noscopes "
        f"x{fmt(without.get('ratio'), '.3f')} of untraced; {overhead_rest(with_scopes)}",
        {"broad-scopes": overhead_numbers(with_scopes),
         "broad-noscopes": overhead_numbers(without), "scope_ratio": ratio,
         "scope_ratio_interval": [low, high], "paired_turns": pair["turns"]})


@pytest.mark.row("modules scope parts")
def test_m_scope_parts_under_the_shim(gs, row, gpt):
    """The module scopes' cost by part (bench/overhead/scope_parts.py: the unseen job's model,
    variants in turns, each round paired with its pass without hooks), under the shim at
    metrics with the run's own scopes off: what a module call pays for torch's hooked call path,
    the Python scopes and the C ones (lockstep._scope_hooks). Shown, not judged; FAIL when the
    bench did not run traced or ran without the C variant although its extension is built."""
    row.need(90)
    found = traced_bench(gs, row, "scope-parts", 180, "metrics", "scope_parts.py",
                         env={"LOCKSTEP_SCOPES": "0"})
    if found is None:
        return
    over = found.get("us_per_module_call_over_no_hooks") or {}
    # The build's staged package (lockstep run puts it on the job's PYTHONPATH).
    built = bool(glob.glob(os.path.join(gs.config.build, "python", "lockstep",
                                        "_scope_hooks*.so")))
    if built and "module scopes (C)" not in over:
        row("FAIL", "lockstep._scope_hooks is built but the bench ran without it")
        return

    def part(name):
        if name not in over:
            return f"{name} -"
        low, high = over[name]["interval"]
        return f"{name} {over[name]['median']:+.1f} [{low:+.1f}, {high:+.1f}]"
    pieces = found.get("ns_per_call") or {}
    c_hooks = pieces.get("forward_pre + forward_post in C (the same)")
    py_hooks = pieces.get("forward_pre + forward_post (3 inputs, 1 output)")
    row("PASS", f"us a module call over no hooks ({found.get('module_calls_per_pass')} a pass, "
                f"{found.get('rounds')} paired rounds): " +
        ", ".join(part(n) for n in ("empty hooks", "module scopes", "module scopes (C)")) +
        f"; a module's forward hooks {fmt(py_hooks and py_hooks / 1e3, '.1f')} us in Python, "
        f"{fmt(c_hooks and c_hooks / 1e3, '.1f')} in C", found)
