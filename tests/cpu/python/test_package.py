"""The package as a job imports it: without its extension (another python3, a source tree), and
staged whole in the build tree."""
import os
import pathlib
import subprocess
import sys

import pytest

import lockstep

SOURCE = pathlib.Path(__file__).resolve().parents[3] / "python"


def test_the_package_imports_without_its_extension_and_open_says_what_to_install(tmp_path):
    # The source tree has no _core: as a job's python3 for which it was not built.
    script = ("import lockstep\n"
              "try:\n    lockstep.open('x')\nexcept ImportError as e:\n    print(e)\n")
    env = dict(os.environ, PYTHONPATH=str(SOURCE), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, env=env, cwd=tmp_path).stdout
    assert "lockstep._core" in out and "pybind11-dev" in out


def test_the_build_stages_every_python_file_of_the_package():
    pytest.importorskip("lockstep._core", reason="lockstep._core is not built")
    staged = pathlib.Path(lockstep.__file__).parent
    assert staged != SOURCE / "lockstep"  # the tests run on what the build staged
    sources = {p.relative_to(SOURCE / "lockstep") for p in (SOURCE / "lockstep").rglob("*.py")}
    assert sources <= {p.relative_to(staged) for p in staged.rglob("*.py")}
    assert list(staged.glob("_core*.so"))
