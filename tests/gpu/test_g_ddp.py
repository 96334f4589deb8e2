"""Group g: the DDP job on two GPUs: deterministic pairs at broad (grouped NCCL calls) and full,
the caching allocator's pair, and a planted gradient named on its rank."""

import json
import os
import re

import pytest

import gpu_suite

DDP = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "train_ddp.py")
STEPS = 8
PLANT_STEP = 4
PLANT_RANK = 1
pytestmark = [pytest.mark.gpu, pytest.mark.two_gpus]


@pytest.fixture(scope="module")
def ddp(gs):
    if not gs.have_torch() or not gs.have_lockstep():
        pytest.skip(f"needs torch with CUDA and {gs.config.lockstep}")
    return [gs.config.py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", 2,
            DDP, "--steps", STEPS]


@pytest.fixture(scope="module")
def untraced(gs, ddp):
    # The deterministic pair also issues grouped NCCL calls (batched send/recv, coalesced).
    return gs.untraced("ddp-untraced", 240, ddp + ["--grouped"])


def clean_full(gs, ddp, name):
    """A clean run at full (one, shared by the checks that need it)."""
    if not os.path.isdir(gs.path(name)):
        gs.traced(name, "full", 240, ddp)
    return name


@pytest.mark.row("ddp untraced")
def test_g_untraced_runs(row, untraced):
    if untraced.rc != 0:
        row("FAIL", f"rc {untraced.rc}: {untraced.first('(?i)error', 70, stderr=True)}")
    else:
        row("PASS", f"{len(re.findall('step', untraced.text()))} rank-steps")


@pytest.mark.row("ddp det broad")
def test_g_broad_pair_with_grouped_calls_is_identical(gs, row, ddp, untraced):
    row.need(120)
    gs.traced("ddp-broad-1", "broad", 240, ddp + ["--grouped"])
    gs.traced("ddp-broad-2", "broad", 240, ddp + ["--grouped"])
    drc = gs.diff("ddp-det-diff", "ddp-broad-1", "ddp-broad-2").rc
    verdict = gs.check_diff(gs.path("ddp-det-diff.out"), "--expect", "identical")
    numbers = gs.same_losses(untraced.out, gs.path("ddp-broad-1.out"))
    files = sum(len(fs) for _, _, fs in os.walk(gs.path("ddp-broad-1")))
    if drc == 0 and verdict.startswith("PASS") and numbers.startswith("PASS"):
        row("PASS", f"grouped calls; diff 0; {files} files; vs untraced: {numbers[6:]}")
    else:
        row("FAIL", f"diff {drc}; {verdict}; losses vs untraced: {numbers}")


@pytest.mark.row("ddp det full")
def test_g_full_pair_on_cuda_malloc_async_is_identical(gs, row, ddp):
    """At full, `lockstep run` puts PyTorch on cudaMallocAsync (--torch-alloc auto): every
    tensor its own allocation, so kernel regions are exact. Two clean runs must agree."""
    row.need(60)
    clean_full(gs, ddp, "ddp-clean-full")
    gs.traced("ddp-clean-full-2", "full", 240, ddp)
    drc = gs.diff("ddp-det-full-diff", "ddp-clean-full", "ddp-clean-full-2").rc
    verdict = gs.check_diff(gs.path("ddp-det-full-diff.out"), "--expect", "identical")
    if drc == 0 and verdict.startswith("PASS"):
        row("PASS", f"cudaMallocAsync: diff 0; {verdict[6:]}")
    else:
        row("FAIL", f"cudaMallocAsync: diff {drc}; {verdict}")


@pytest.mark.row("ddp full caching alloc")
def test_g_caching_allocator_pair_is_counted(gs, row, ddp):
    """The same pair on PyTorch's caching allocator: regions run to the end of shared segments
    and cover bytes no kernel wrote; how many records differ between two clean runs (shown)."""
    row.need(60)
    for name in ("ddp-caching-1", "ddp-caching-2"):
        gs.traced(name, "full", 240, ddp, run_args=["--torch-alloc", "keep"])
    diff = gs.diff("ddp-caching-diff", "ddp-caching-1", "ddp-caching-2")
    try:
        doc = json.loads(diff.text())
        st, first = doc.get("stats", {}), doc.get("first_divergence") or {}
        figure = (f"{st.get('divergent_records', 0)} of {st.get('records_compared', 0)} records "
                  f"differ; first: {first.get('classification', 'none')}")
    except ValueError as e:
        figure = f"unreadable report: {e}"
    row("PASS" if diff.rc <= 1 else "FAIL", f"diff {diff.rc}; {figure}")


@pytest.mark.row("ddp culprit rank")
def test_g_planted_gradient_names_its_rank(gs, row, ddp):
    row.need(60)
    clean_full(gs, ddp, "ddp-clean-full")
    gs.traced("ddp-plant-full", "full", 240, ddp + ["--plant-kind", "grad", "--plant-rank",
                                                     PLANT_RANK, "--plant-step", PLANT_STEP])
    drc = gs.diff("ddp-plant-diff", "ddp-clean-full", "ddp-plant-full").rc
    verdict = gs.check_diff(gs.path("ddp-plant-diff.out"), "--expect", "divergent", "--step",
                            PLANT_STEP, "--rank", PLANT_RANK, "--culprit-rank", PLANT_RANK,
                            "--receiver-rank", 0)
    if drc == 1 and verdict.startswith("PASS"):
        row("PASS", verdict[6:])
    else:
        row("FAIL", f"diff {drc}; {verdict}")


# NCCL's own choices (issue #30): the shim serves as NCCL's profiler plugin. NCCL_ALGO per
# function (NCCL 2.24+ syntax): a plain "Tree" would also bind DDP's broadcasts, which have no
# Tree algorithm (NCCL then fails them: "no algorithm/protocol available").
NCCL_RING = {"NCCL_ALGO": "allreduce:ring"}
NCCL_TREE = {"NCCL_ALGO": "allreduce:tree"}
COLLECTIVE_LINE = re.compile(r"\bnccl(AllReduce|Broadcast|Bcast|AllGather|ReduceScatter|Reduce)\b")


def nccl_runs(gs, ddp):
    """The DDP job at broad with all-reduce forced to Ring, then to Tree (each once)."""
    for name, env in (("ddp-nccl-ring", NCCL_RING), ("ddp-nccl-tree", NCCL_TREE)):
        if not os.path.isdir(gs.path(name)):
            gs.traced(name, "broad", 240, ddp, env=env)
    return "ddp-nccl-ring", "ddp-nccl-tree"


@pytest.mark.row("ddp nccl algo/proto")
def test_g_every_collective_record_has_nccls_algorithm_and_protocol(gs, row, ddp):
    row.need(60)
    ring, _ = nccl_runs(gs, ddp)
    show = gs.run("ddp-nccl-show", 120, [gs.config.lockstep, "show", gs.path(ring)])
    lines = [line for line in show.text().splitlines() if COLLECTIVE_LINE.search(line)]
    chosen = [line for line in lines if "nccl_algo=" in line and "nccl_proto=" in line]
    algos = {}
    for line in chosen:
        m = re.search(r"\b(ncclAllReduce)\b.*nccl_algo=(\S+)", line)
        if m:
            algos[m.group(2)] = algos.get(m.group(2), 0) + 1
    figure = (f"{len(chosen)} of {len(lines)} collective records with algorithm and protocol; "
              f"all-reduce algorithms {algos or 'none'}")
    ok = show.rc == 0 and lines and len(chosen) == len(lines) and set(algos) == {"Ring"}
    row("PASS" if ok else "FAIL", figure)


@pytest.mark.row("ddp nccl Ring vs Tree")
def test_g_ring_versus_tree_is_an_environment_difference_then_an_algorithm_difference(gs, row,
                                                                                      ddp):
    row.need(60)
    ring, tree = nccl_runs(gs, ddp)
    text = gs.run("ddp-nccl-diff-text", 120,
                  [gs.config.lockstep, "diff", gs.path(ring), gs.path(tree)]).text()
    report = gs.diff("ddp-nccl-diff", ring, tree)
    try:
        doc = json.loads(report.text())
    except ValueError as e:
        row("FAIL", f"diff {report.rc}: unreadable report: {e}")
        return
    env_keys = [d.get("key") for d in doc.get("environment", {}).get("differences", [])]
    choices = doc.get("nccl_choices") or {}
    first = choices.get("first") or {}
    env_at = text.find("NCCL_ALGO")
    choice_at = text.find("NCCL chose differently")
    culprit = doc.get("culprit") or {}
    named = (culprit.get("kind") != "collective"
             or "NCCL algorithm Ring vs Tree" in culprit.get("detail", ""))
    ok = ("environment.NCCL_ALGO" in env_keys and "algorithm Ring vs Tree" in
          first.get("difference", "") and 0 <= env_at < choice_at and named)
    row("PASS" if ok else "FAIL",
        f"diff {report.rc} ({doc.get('verdict')}); environment first: {0 <= env_at < choice_at}; "
        f"{choices.get('total', 0)} collectives chose differently, first "
        f"{first.get('name', '-')}: {first.get('difference', '-')}"
        + (f"; culprit {culprit.get('name')}: {culprit.get('detail')}" if culprit else ""))
