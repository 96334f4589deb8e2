"""Group o: overhead on two GPUs, the DDP job at broad, judged by its ratio (the shim's own time
per step shown)."""

import pytest

import gpu_suite


@pytest.mark.gpu
@pytest.mark.two_gpus
@pytest.mark.row("ddp overhead broad")
def test_o_ddp_at_broad_within_target(gs, row):
    if not gs.have_torch() or not gs.have_lockstep():
        row.skip(f"needs torch with CUDA and {gs.config.lockstep}")
    gpu_suite.broad_overhead(gs, row, "ddp", 2, "ratio")
