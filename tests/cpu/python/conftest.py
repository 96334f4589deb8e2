"""What the Python package's tests share: the sample traces (examples/traces, made by the shim on
an H200), the built CLI to compare against, and a scratch directory. ctest sets the variables
(tests/cpu/python/CMakeLists.txt). Without the extension built, the tests that need it skip."""
import os
import pathlib
import shutil
import subprocess

import pytest

TRACES = pathlib.Path(os.environ.get(
    "LOCKSTEP_SAMPLE_TRACES", pathlib.Path(__file__).resolve().parents[3] / "examples/traces"))


@pytest.fixture
def traces():
    return TRACES


@pytest.fixture
def cli():
    """Runs the built `lockstep` binary: (exit code, stdout, stderr)."""
    binary = os.environ.get("LOCKSTEP_CLI")
    if not binary:
        pytest.skip("LOCKSTEP_CLI is not set (ctest sets it)")

    def run(*args):
        p = subprocess.run([binary, *map(str, args)], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr
    return run


@pytest.fixture
def copy_run(tmp_path):
    """Copies a sample run into tmp_path; cut=N keeps its trace file's first N bytes."""
    def copy(name, cut=None, dest=None):
        dest = tmp_path / (dest or name)
        shutil.copytree(TRACES / name, dest)
        if cut is not None:
            (trace,) = dest.glob("*.lstrace")
            trace.write_bytes(trace.read_bytes()[:cut])
        return dest
    return copy
