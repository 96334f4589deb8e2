"""Group w: why, not only where (issue #30's CPU-side parts, issue #29's readable names): cuBLASLt
algorithms decoded in the GEMM records, the mechanism line under the culprit of the planted
atomic (examples/cuda) and the planted index_add_ (the GPT example), an environment difference
reported before the ops, and kernel names shortened in `show`."""

import json
import os
import re

import pytest

import gpu_suite

CUDA_ARGS = ["--steps", 6, "--block-scaled"]
CUDA_PLANT = ["--steps", 6, "--plant", "atomic", "--plant-step", 3]
GPT = os.path.join(gpu_suite.ROOT, "examples", "pytorch", "train_gpt.py")
GPT_STEPS = 8
GPT_PLANT = ["--plant-step", 5, "--plant-layer", 1]
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
    return gs.config.cuda_example


@pytest.fixture(scope="module")
def gpt(gs, lockstep):
    if not gs.have_torch():
        pytest.skip(f"no torch with CUDA in {gs.config.py}")
    return [gs.config.py, GPT, "--steps", GPT_STEPS]


def culprit_block(text):
    """The lines of a diff's text from its culprit line to the blank line after it."""
    m = re.search(r"^culprit .*?(?=^\s*$)", text, re.M | re.S)
    return m.group(0) if m else ""


@pytest.mark.row("why gemm algorithm")
def test_w_gemm_algorithms_are_decoded_in_show(gs, row, lockstep, gpt):
    """The GPT example with PyTorch's cuBLASLt path: every cublasLtMatmul record carries the
    algorithm cuBLASLt was given, decoded (id/tile/stages/split-k and the trailing fields)."""
    row.need(60)
    run = gs.traced("why-gpt-broad", "broad", 240, gpt, env={"TORCH_BLAS_PREFER_CUBLASLT": "1"})
    if run.rc:
        row("FAIL", f"job exit {run.rc}: {run.last_err(60)}")
        return
    show = gs.run("why-gpt-show", 120, [lockstep, "show", gs.path("why-gpt-broad"), "--grep",
                                        "^cublasLtMatmul$"])
    lines = [ln for ln in show.text().splitlines() if " gemm cublasLtMatmul" in ln]
    algos = [re.search(r" algo=(\S+)", ln).group(1) for ln in lines if " algo=" in ln]
    decoded = [a for a in algos if re.fullmatch(r"id\d+/tile\d+/stages\d+/splitk\d+", a)
               and a != "id0/tile0/stages0/splitk0"]
    extra = sorted({m for ln in lines for m in re.findall(
        r" (reduction_scheme|cta_swizzling|custom_option|inner_shape|cluster_shape)=(\S+)", ln)})
    common = max(set(decoded), key=decoded.count) if decoded else "none"
    figure = (f"{len(decoded)} of {len(lines)} cublasLtMatmul records decoded, most common "
              f"algo={common}; other fields: {', '.join(f'{k}={v}' for k, v in extra) or 'all 0'}")
    row("PASS" if lines and len(decoded) == len(lines) else "FAIL", figure)


@pytest.mark.row("why mechanism cuda")
def test_w_mechanism_under_the_planted_atomic(gs, row, lockstep, cuda_example):
    row.need(30)
    for i in (1, 2):
        gs.traced(f"why-cuda-atomic-{i}", "full", 120, [cuda_example, *CUDA_PLANT])
    text = gs.run("why-cuda-atomic-diff", 60, [lockstep, "diff", gs.path("why-cuda-atomic-1"),
                                               gs.path("why-cuda-atomic-2")])
    report = gs.diff("why-cuda-atomic-json", "why-cuda-atomic-1", "why-cuda-atomic-2")
    doc = json.loads(report.text() or "{}")
    mechanism = ((doc.get("culprit") or {}).get("mechanism") or {}).get("id")
    block = culprit_block(text.text())
    line = next((ln.strip() for ln in block.splitlines() if "mechanism:" in ln), "")
    ok = text.rc == 1 and mechanism == "NamedAtomic" and "planted_atomic_sum_squares" in block
    row("PASS" if ok else "FAIL", line or f"no mechanism line (diff {text.rc}): {block[:200]}")


@pytest.mark.row("why mechanism gpt")
def test_w_mechanism_under_the_planted_index_add(gs, row, lockstep, gpt):
    row.need(90)
    for i in (1, 2):
        gs.traced(f"why-gpt-plant-{i}", "full", 240, gpt + GPT_PLANT)
    text = gs.run("why-gpt-plant-diff", 120, [lockstep, "diff", gs.path("why-gpt-plant-1"),
                                              gs.path("why-gpt-plant-2")])
    report = gs.diff("why-gpt-plant-json", "why-gpt-plant-1", "why-gpt-plant-2")
    doc = json.loads(report.text() or "{}")
    culprit = doc.get("culprit") or {}
    mechanism = (culprit.get("mechanism") or {}).get("id")
    block = culprit_block(text.text())
    line = next((ln.strip() for ln in block.splitlines() if "mechanism:" in ln), "")
    ok = text.rc == 1 and mechanism == "IndexAdd"
    row("PASS" if ok else "FAIL",
        f"{culprit.get('name_short')}: {line}" if line else f"diff {text.rc}: {block[:200]}")


@pytest.mark.row("why environment first")
def test_w_environment_difference_is_reported_first(gs, row, lockstep, cuda_example):
    """Run B with NVIDIA_TF32_OVERRIDE=0 and another CUBLAS_WORKSPACE_CONFIG (the suite gives
    every job :4096:8, conftest.py): both are listed before the ops, and do not make the runs
    divergent by themselves."""
    row.need(30)
    gs.traced("why-env-a", "broad", 120, [cuda_example, *CUDA_ARGS])
    gs.traced("why-env-b", "broad", 120, [cuda_example, *CUDA_ARGS],
              env={"NVIDIA_TF32_OVERRIDE": "0", "CUBLAS_WORKSPACE_CONFIG": ":16:8"})
    text = gs.run("why-env-diff", 60, [lockstep, "diff", gs.path("why-env-a"),
                                       gs.path("why-env-b")]).text()
    doc = json.loads(gs.diff("why-env-json", "why-env-a", "why-env-b").text() or "{}")
    keys = {d.get("key") for d in (doc.get("environment") or {}).get("differences", [])}
    wanted = {"environment.NVIDIA_TF32_OVERRIDE", "environment.CUBLAS_WORKSPACE_CONFIG"}
    env_at, ops_at = text.find("NVIDIA_TF32_OVERRIDE"), text.find("compared;")
    line = next((ln.strip() for ln in text.splitlines() if "NVIDIA_TF32_OVERRIDE" in ln), "")
    ok = wanted <= keys and 0 <= env_at < ops_at
    missing = ", ".join(sorted(k.split(".", 1)[1] for k in wanted - keys))
    row("PASS" if ok else "FAIL", f"{line}; verdict {doc.get('verdict')}"
        + (f"; not listed: {missing}" if missing else ""))


@pytest.mark.row("why short names")
def test_w_show_shortens_kernel_names_and_verbose_keeps_them(gs, row, lockstep, gpt):
    row.need(20)
    trace = gs.path("why-gpt-broad")
    if not os.path.isdir(trace):
        row.skip("no GPT trace (why gemm algorithm)")
    short = gs.run("why-show-short", 60, [lockstep, "show", trace, "--grep", "elementwise",
                                          "--limit", 5]).text()
    full = gs.run("why-show-full", 60, [lockstep, "show", trace, "--grep", "elementwise",
                                        "--limit", 5, "--verbose"]).text()
    names = re.findall(r" kernel (\S+)", short)
    ok = bool(names) and "{lambda" not in short and "at::native::" in full
    row("PASS" if ok else "FAIL", f"e.g. {names[0] if names else 'no kernel line'}")
