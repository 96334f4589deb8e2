"""lockstep's JAX hooks (python/lockstep/_jax_hooks.py, armed by _boot/sitecustomize.py) with a
stand-in jax (fake_jax/: the annotation classes as JAX 0.11 lays them out; the real one needs a
wheel of hundreds of MB) and the stand-in shim (recording_shim.c) that writes what it is sent:
armed on `import jax` only, stream-ordered steps asked for, StepTraceAnnotation's step number and
TraceAnnotation's text sent when entered, the annotations still entered and exited.

Run by ctest: python3 -m unittest test_jax_hooks, with RECORDING_SHIM and LOCKSTEP_PYTHON_DIR in
the environment."""

import os
import tempfile
import textwrap
import unittest
from pathlib import Path

from test_torch_hooks import HERE, SHIM, run

FAKE_JAX = os.path.join(HERE, "fake_jax")


def run_jax(body, tmp_path, **kwargs):
    return run(textwrap.dedent(body), tmp_path, extra_path=(FAKE_JAX,), **kwargs)


@unittest.skipIf(not SHIM, "RECORDING_SHIM not built")
class JaxHooks(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.tmp = Path(self._dir.name)

    def tearDown(self):
        self._dir.cleanup()

    def test_importing_jax_asks_for_stream_ordered_steps_once(self):
        done, calls = run_jax("import jax\nimport jax.profiler\n", self.tmp)
        assert done.returncode == 0, done.stderr
        assert calls == "stream order\n", calls

    def test_a_job_that_never_imports_jax_sends_nothing(self):
        done, calls = run_jax("import json\n", self.tmp)
        assert done.returncode == 0, done.stderr
        assert calls == "", calls

    def test_each_step_annotation_starts_the_jobs_numbered_step_when_entered(self):
        body = """
            import jax
            from jax.profiler import StepTraceAnnotation
            for i in range(3):
                annotation = StepTraceAnnotation("train", step_num=i)
                print("made", flush=True)
                with annotation:
                    pass
            with StepTraceAnnotation("eval"):  # no number: a named step
                pass
            from jax._src.profiler import entered
            print(" ".join(entered))
            """
        done, calls = run_jax(body, self.tmp)
        assert done.returncode == 0, done.stderr
        assert calls == "stream order\nstep 0\nstep 1\nstep 2\nmark eval\n", calls
        # The annotation still does what it did.
        assert done.stdout.splitlines()[-1] == ("enter train exit train " * 3 +
                                               "enter eval exit eval"), done.stdout

    def test_trace_annotations_are_sent_as_markers_with_their_step_number(self):
        body = """
            import jax.profiler
            with jax.profiler.TraceAnnotation("train_step", step_num=7):
                with jax.profiler.TraceAnnotation("data loading"):
                    pass
            from jax._src.profiler import entered
            print(" ".join(entered))
            """
        done, calls = run_jax(body, self.tmp)
        assert done.returncode == 0, done.stderr
        # The shim decides which text is a step (LOCKSTEP_STEP_ON); the hook sends each.
        assert calls == ("stream order\nmarker train_step step_num=7\nmarker data loading\n"), calls
        assert done.stdout.split() == ["enter", "train_step", "enter", "data", "loading", "exit",
                                       "data", "loading", "exit", "train_step"], done.stdout

    def test_the_package_sends_any_frameworks_marker_text_to_the_shim(self):
        done, calls = run_jax("import lockstep\nlockstep.marker('step 4')\n", self.tmp)
        assert done.returncode == 0, done.stderr
        assert calls == "marker step 4\n", calls

    def test_without_the_shim_the_annotations_work_and_nothing_is_sent(self):
        body = """
            import jax.profiler
            with jax.profiler.StepTraceAnnotation("train", step_num=1):
                pass
            print("ok")
            """
        done, calls = run_jax(body, self.tmp, preload=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "ok\n" and done.stderr == "", (done.stdout, done.stderr)
        assert calls == "", calls


if __name__ == "__main__":
    unittest.main()
