"""CPU tests of bench/overhead/full_bytes.py (issue #34: where full's hashed bytes go): its replay
of the shim's digest reuse on `lockstep show` lines, and a run over a sample full trace through
the real CLI (LOCKSTEP_CLI, which ctest sets; skipped without it).

  python3 -m unittest -v test_full_bytes      (from tests/gpu/e2e)
"""

import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "overhead"))
import full_bytes  # noqa: E402

SAMPLE = os.path.join(ROOT, "examples", "traces", "cuda-det-full-1")


def line(step, kind, name, *buffers):
    """A `lockstep show` line: buffers as (role, bytes, ordinal, offset[, flags]); the flag
    "unwritten" prints as the fingerprint, "unhashed" prints "-" there (no value)."""
    text = f"r0 step {step} seq 1 stream 2 thread 1 {kind} {name} grid_x=1"
    for role, size, ordinal, offset, *flags in buffers:
        fp = ("unwritten" if "unwritten" in flags else "-" if "unhashed" in flags
              else "0123456789abcdef")
        extra = "".join(" " + f for f in flags if f not in ("unwritten", "unhashed"))
        text += f" | {role} arg0 bytes {size}B {fp}{extra} @{ordinal}+{offset}"
    return text + "\n"


class ReplayOfDigestReuse(unittest.TestCase):
    def tally(self, lines, **kw):
        return full_bytes.analyse(lines, first_step=0, **kw)

    def test_an_output_read_next_is_reused_not_hashed_again(self):
        r = self.tally([line(0, "kernel", "a", ("in", 100, 1, 0), ("out", 100, 1, 0)),
                        line(0, "kernel", "b", ("in", 100, 1, 0), ("out", 50, 2, 0))])
        t = r["total"]
        self.assertEqual(t["in afresh new"], 100)   # a's input: nothing hashed there yet
        self.assertEqual(t["in reused"], 100)       # b's input: a's output digest
        self.assertEqual(t["out hashed"], 150)
        self.assertEqual(full_bytes.hashed(t), 250)

    def test_a_view_of_a_hashed_allocation_is_hashed_afresh_for_its_extent(self):
        r = self.tally([line(0, "kernel", "a", ("out", 100, 1, 0)),
                        line(0, "kernel", "b", ("in", 60, 1, 40))])
        self.assertEqual(r["total"]["in afresh extent"], 60)
        self.assertEqual(r["by_name"]["kernel b"]["in afresh extent"], 60)

    def test_a_kernel_output_makes_the_regions_after_its_pointer_stale_not_those_before(self):
        r = self.tally([line(0, "kernel", "a", ("out", 40, 1, 0), ("out", 60, 1, 40)),
                        line(0, "kernel", "w", ("out", 10, 1, 40)),
                        line(0, "kernel", "b", ("in", 40, 1, 0), ("in", 60, 1, 40))])
        t = r["by_name"]["kernel b"]
        self.assertEqual(t["in reused"], 40)
        self.assertEqual(t["in afresh written"], 60)

    def test_a_gemm_output_makes_only_its_extent_stale(self):
        r = self.tally([line(0, "kernel", "a", ("out", 40, 1, 0), ("out", 60, 1, 60)),
                        line(0, "gemm", "g", ("out", 20, 1, 40)),
                        line(0, "kernel", "b", ("in", 40, 1, 0), ("in", 60, 1, 60))])
        self.assertEqual(r["by_name"]["kernel b"]["in reused"], 100)

    def test_flags_say_what_was_not_read(self):
        r = self.tally([line(0, "kernel", "fill", ("out", 64, 3, 0, "recalled")),
                        line(0, "kernel", "k", ("in", 32, 4, 0, "unwritten"),
                             ("in", 16, 5, 0, "enclosing"), ("in", 8, 6, 0, "read-only"))])
        t = r["total"]
        self.assertEqual(t["out recalled"], 64)
        self.assertEqual(t["in not read"], 48)
        self.assertEqual(t["out read-only"], 8)
        self.assertEqual(t["in afresh new"], 8)  # a read-only input is still hashed before
        self.assertEqual(t["out hashed"], 0)

    def test_an_entry_without_a_value_was_not_read(self):
        # A GEMM's C under beta 0 is recorded by shape with no fingerprint ("-"): its bytes
        # were not read; an output with no value was not hashed, and is no digest to reuse.
        r = self.tally([line(0, "gemm", "g", ("in", 64, 1, 0), ("in", 32, 2, 0, "unhashed"),
                             ("out", 32, 2, 0, "unhashed")),
                        line(0, "kernel", "k", ("in", 32, 2, 0))])
        t = r["total"]
        self.assertEqual(t["in not read"], 32)
        self.assertEqual(t["in afresh new"], 64 + 32)  # k's input: nothing hashed there yet
        self.assertEqual(t["out hashed"], 0)

    def test_a_recalled_fill_is_reusable_as_the_next_input(self):
        r = self.tally([line(0, "kernel", "fill", ("out", 64, 3, 0, "recalled")),
                        line(0, "kernel", "k", ("in", 64, 3, 0))])
        self.assertEqual(r["total"]["in reused"], 64)

    def test_steps_before_the_first_counted_still_feed_the_replay(self):
        lines = [line(0, "kernel", "a", ("out", 100, 1, 0)),
                 line(1, "kernel", "b", ("in", 100, 1, 0), ("out", 100, 2, 0))]
        r = full_bytes.analyse(lines)  # step 1 on
        self.assertEqual(r["steps"], [1])
        self.assertEqual(r["total"]["in reused"], 100)
        self.assertNotIn("kernel a", r["by_name"])
        only = full_bytes.analyse(lines, step=0)
        self.assertEqual(only["total"]["out hashed"], 100)

    def test_a_call_with_an_input_hashed_afresh_counts_as_asking_for_a_hash_launch(self):
        r = self.tally([line(0, "kernel", "a", ("in", 100, 1, 0), ("out", 100, 2, 0)),
                        line(0, "kernel", "b", ("in", 100, 2, 0), ("out", 100, 2, 0)),
                        line(0, "kernel", "c", ("in", 100, 2, 0), ("in", 8, 3, 0),
                             ("out", 100, 3, 0))])
        self.assertEqual(r["total"]["records"], 3)
        self.assertEqual(r["total"]["afresh records"], 2)  # a (new) and c (its fresh output)
        self.assertNotIn("afresh records", r["by_name"]["kernel b"])  # every digest reused

    def test_by_launches_ranks_the_calls_that_ask_for_hash_launches_first(self):
        lines = [line(0, "kernel", "big", ("in", 1 << 30, 1, 0), ("out", 1 << 30, 2, 0))]
        lines += [line(0, "kernel", "small", ("in", 4, 10 + i, 0), ("out", 4, 10 + i, 0))
                  for i in range(3)]
        r = self.tally(lines)
        by_bytes = full_bytes.report(r, 5).splitlines()
        by_launches = full_bytes.report(r, 5, by="launches").splitlines()
        self.assertIn("calls with an input hashed afresh (a hash launch before each): 4 of 4",
                      by_launches[3])
        self.assertTrue(by_bytes[5].endswith("kernel big"), by_bytes)
        self.assertTrue(by_launches[5].endswith("kernel small"), by_launches)
        self.assertEqual(by_launches[5].split()[-3], "3")  # its 3 calls, each afresh

    def test_lines_that_are_not_records_are_skipped(self):
        r = self.tally(["trace /tmp/u\n", "\n", "r0 step x\n"])
        self.assertEqual(r["steps"], [])
        self.assertIn("no step", full_bytes.report(r, 5))


@unittest.skipUnless(os.environ.get("LOCKSTEP_CLI"), "LOCKSTEP_CLI not set (ctest sets it)")
class OverASampleTrace(unittest.TestCase):
    def test_a_full_trace_reads_as_hashed_and_reused_bytes_per_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bytes.json")
            text = io.StringIO()
            with redirect_stdout(text):
                rc = full_bytes.main([SAMPLE, "--lockstep", os.environ["LOCKSTEP_CLI"],
                                      "--json", out])
            self.assertEqual(rc, 0)
            with open(out) as f:
                data = json.load(f)
        self.assertGreater(len(data["steps"]), 1)
        per_step = data["per_step_bytes"]
        self.assertGreater(per_step["out hashed"], 0)
        self.assertGreater(per_step["in reused"], 0)  # the sample's activations are read back
        self.assertIn("kernel gelu_forward", data["by_name"])
        self.assertIn("read (hashed)", text.getvalue())

    def test_a_missing_trace_exits_2_naming_it(self):
        run = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "overhead",
                                                           "full_bytes.py"),
                              "/nonexistent/trace", "--lockstep", os.environ["LOCKSTEP_CLI"]],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertIn("/nonexistent/trace", run.stderr)

    def test_a_corrupt_trace_exits_2_with_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "host-pid-1.lstrace"), "wb") as f:
                f.write(b"LSTR not a trace at all" * 8)
            run = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "overhead",
                                                               "full_bytes.py"),
                                  tmp, "--lockstep", os.environ["LOCKSTEP_CLI"]],
                                 capture_output=True, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
        self.assertIn("lockstep show failed", run.stderr)
        self.assertEqual(run.stdout, "")


if __name__ == "__main__":
    unittest.main()
