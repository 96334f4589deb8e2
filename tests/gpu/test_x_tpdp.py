"""Group x: tensor x data parallel, TP=2 over every visible GPU (up to 8: issue 9 on
nvidia-h200-x8): a deterministic pair at broad, a plant named on its rank with its TP partner
as receiver, and the overhead at broad judged by the shim's time per step."""

import os
import re
import sys

import pytest

import gpu_suite

TPDP = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "train_tp_dp.py")
STEPS = 6
PLANT_STEP = 3
pytestmark = [pytest.mark.gpu, pytest.mark.two_gpus]


def ranks(gs):
    n = min(gs.gpus(), 8)
    return n - n % 2


@pytest.fixture(scope="module")
def tpdp(gs):
    if not gs.have_torch() or not gs.have_lockstep():
        pytest.skip(f"needs torch with CUDA and {gs.config.lockstep}")
    return [gs.config.py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            ranks(gs), TPDP, "--tp", 2, "--steps", STEPS]


@pytest.fixture(scope="module")
def untraced(gs, tpdp):
    return gs.untraced("tpdp-untraced", 240, tpdp)


@pytest.mark.row("tpdp untraced")
def test_x_untraced_runs(gs, row, untraced):
    if untraced.rc != 0:
        row("FAIL", f"rc {untraced.rc}: {untraced.first('(?i)error', 70, stderr=True)}")
    else:
        row("PASS", f"TP 2 x DP {ranks(gs) // 2}; "
                    f"{len(re.findall('step', untraced.text()))} rank-steps")


@pytest.mark.row("tpdp det broad")
def test_x_broad_pair_is_identical(gs, row, tpdp, untraced):
    row.need(150)
    gs.traced("tpdp-broad-1", "broad", 240, tpdp)
    gs.traced("tpdp-broad-2", "broad", 240, tpdp)
    drc = gs.diff("tpdp-det-diff", "tpdp-broad-1", "tpdp-broad-2").rc
    # What broad fingerprints in this job (the collectives' send and recv), into the run log.
    # No row; its exit code is not the diff's.
    gs.run("tpdp-broad-stats", 60, [gs.config.lockstep, "stats", gs.path("tpdp-broad-1")])
    verdict = gs.check_diff(gs.path("tpdp-det-diff.out"), "--expect", "identical")
    numbers = gs.same_losses(untraced.out, gs.path("tpdp-broad-1.out"))
    if drc == 0 and verdict.startswith("PASS") and numbers.startswith("PASS"):
        row("PASS", f"diff 0; {verdict[6:]}; vs untraced: {numbers[6:]}")
    else:
        row("FAIL", f"diff {drc}; {verdict}; losses vs untraced: {numbers}")


@pytest.mark.row("tpdp culprit rank")
def test_x_planted_rank_is_the_culprit(gs, row, tpdp):
    row.need(90)
    plant_rank = ranks(gs) - 1  # TP index 1 of the last TP group; its TP partner is one less
    gs.traced("tpdp-clean-full", "full", 240, tpdp)
    gs.traced("tpdp-plant-full", "full", 240, tpdp + ["--plant-rank", plant_rank,
                                                       "--plant-step", PLANT_STEP])
    # The diff's own cost on these ranks: wall time and peak memory.
    diff = gs.run("tpdp-plant-diff", 120, [sys.executable, "-c", DIFF_COST, gs.config.lockstep,
                                           "diff", gs.path("tpdp-clean-full"),
                                           gs.path("tpdp-plant-full"), "--json"])
    cost = diff.first(r"diff-cost", stderr=True).replace("diff-cost ", "")
    verdict = gs.check_diff(diff.out, "--expect", "divergent", "--step", PLANT_STEP, "--rank",
                            plant_rank, "--classification", "origin", "--culprit-rank",
                            plant_rank, "--receiver-rank", plant_rank - 1)
    if diff.rc == 1 and verdict.startswith("PASS"):
        row("PASS", f"{verdict[6:]}; diff {cost or '?'}")
    else:
        row("FAIL", f"diff {diff.rc}; {verdict}")


@pytest.mark.row("tpdp overhead broad")
def test_x_tpdp_shim_time_at_broad(gs, row, tpdp):
    # Judged by the shim's time per step: the TP job's sets of processes differ by up to 9% in
    # wall time, so no affordable number of turns resolves 2% from wall time; the self time
    # does, as for the launch-bound GPT job. ~700 traced calls per 18 ms step put it over the
    # 2% goal: KNOWN, README's Known limits say why.
    gpu_suite.broad_overhead(gs, row, "tpdp", ranks(gs), "self")


DIFF_COST = """import resource, subprocess, sys, time
t = time.monotonic(); rc = subprocess.call(sys.argv[1:])
print("diff-cost %.2f s, peak %d MiB" % (time.monotonic() - t,
      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024), file=sys.stderr)
sys.exit(rc)"""

