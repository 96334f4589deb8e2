"""Group a: the GPU itself."""

import pytest

import gpu_suite


@pytest.mark.row("gpu")
def test_a_gpu_is_visible(gs, row):
    facts = gpu_suite.run_facts.gpu_facts()
    n = gs.gpus()
    gs.say(f"nvidia-smi: {facts} ({n} GPUs)")
    if facts and n >= 1:
        row("PASS", f"{n}x {', '.join(facts)}", {"gpus": n})
    elif gs.config.require_gpu:  # run.sh, the GPU machine's entry point: no GPU is a failure
        row("FAIL", "no GPU: nvidia-smi lists none" if facts else "nvidia-smi not found")
    else:
        row.skip("no GPU (nvidia-smi lists none)")
