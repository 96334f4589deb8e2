"""Group b: the GPU gtest binaries of the build folder, and compute-sanitizer on the hashing
test."""

import os
import re
import shutil

import pytest

import gpu_suite

GTESTS = gpu_suite.Config().gtests()


def count(text, word):
    """The figure of gtest's last "[  WORD  ] N tests" line, or None."""
    found = re.findall(r"^\[ +" + word + r" +\] (\d+) test", text, re.M)
    return int(found[-1]) if found else None


@pytest.mark.gpu
@pytest.mark.row("gtest {binary}")
@pytest.mark.parametrize("binary", [os.path.basename(b) for b in GTESTS] or ["(gpu)"])
def test_b_gtest_passes_without_skips(gs, row, binary):
    if not GTESTS:
        row.skip(f"no binaries under {gs.config.build}/tests/gpu")
    row.need(30)
    path = next(b for b in GTESTS if os.path.basename(b) == binary)
    run = gs.untraced(f"gtest-{binary}", 180, [path, "--gtest_color=no"])
    text = run.text()
    passed, skipped, failed = (count(text, w) for w in ("PASSED", "SKIPPED", "FAILED"))
    figure = f"{passed or 0} passed, {skipped or 0} skipped, {failed or 0} failed"
    numbers = {"passed": passed or 0, "skipped": skipped or 0, "failed": failed or 0}
    if run.rc == 124:
        figure = "timeout; " + figure
    # On the GPU machine a GPU test has no reason to skip: a skip here is a test not run (a shim
    # it could not find, say), not a pass. Its reason is the line after gtest's "Skipped".
    lines = text.splitlines()
    why = next((lines[i + 1][:60] for i, line in enumerate(lines[:-1])
                if line.endswith(": Skipped")), "?")
    if run.rc == 0 and passed is not None and not skipped:
        row("PASS", figure, numbers)
    elif run.rc == 0 and passed is not None:
        row("FAIL", f"{figure} on a GPU: {why}", numbers)
    else:
        row("FAIL", f"rc {run.rc}; {figure}", numbers)


@pytest.mark.gpu
@pytest.mark.row("sanitizer {tool}")
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_b_sanitizer_finds_nothing_in_the_hashing_test(gs, row, tool):
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    hash_test = next((b for b in GTESTS if "hash" in b.lower()), None)
    if hash_test is None:
        row.skip("no hashing GPU test binary")
    if not os.access(sanitizer, os.X_OK):
        row.skip("compute-sanitizer not found")
    row.need(60)
    run = gs.untraced(f"sanitizer-{tool}", 240, [sanitizer, "--tool", tool, "--error-exitcode",
                                                 "99", hash_test, "--gtest_color=no"])
    summary = re.sub(r"^=* *", "", run.first(r"ERROR SUMMARY|RACECHECK SUMMARY|HAZARD"))
    summary = summary or run.first("SUMMARY", stderr=True)
    if run.rc == 0:
        row("PASS", summary or "clean")
    else:
        row("FAIL", f"rc {run.rc}; {summary or 'see run.log'}")
