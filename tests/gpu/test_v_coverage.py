"""Group v: CUPTI coverage validation (issue 4, LOCKSTEP_VALIDATE=1): every kernel the GPU ran
was traced. Triton (torch.compile), a CUDA graph, torch.compile's own CUDA graphs
(reduce-overhead) and, with two GPUs, the DDP job (NCCL): every source of kernels."""

import os

import pytest

import gpu_suite

GPT = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "train_gpt.py")
DDP = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "train_ddp.py")
MODES = os.environ.get("COVERAGE_MODES", "compile cuda-graph reduce-overhead ddp").split()
pytestmark = pytest.mark.gpu


def job(py, mode):
    if mode == "reduce-overhead":
        return [py, GPT, "--steps", 6, "--compile", "--compile-mode", "reduce-overhead"]
    if mode == "ddp":
        return [py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", 2, DDP,
                "--steps", 4, "--grouped"]
    return [py, GPT, "--steps", 4, f"--{mode}"]


@pytest.mark.row("coverage {mode}")
@pytest.mark.parametrize("mode", [pytest.param(m, marks=pytest.mark.two_gpus) if m == "ddp"
                                  else m for m in MODES])
def test_v_every_kernel_is_accounted_for(gs, row, mode):
    if not gs.have_lockstep() or not gs.have_torch():
        row.skip("needs lockstep and torch with CUDA")
    row.need(90)
    run = gs.traced(f"validate-{mode}", "broad", 300, job(gs.config.py, mode),
                    env={"LOCKSTEP_VALIDATE": "1"})
    rc, line = gs.helper("coverage.py", run.trace)
    if rc == 0:
        row("PASS", line.replace("PASS: ", "", 1))
    else:
        row("FAIL", line.replace("FAIL: ", "", 1))
