"""bench/tools/diff_scale.py: its verdicts against issue #34's targets, and a small run of the
real bench and CLI whose results file carries the facts and the verdicts."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import diff_scale  # noqa: E402


def result(ranks=2432, **cases):
    base = {"identical": (0, 1.1, 49.0), "last_step": (1, 1.4, 55.0),
            "first_step": (1, 1.3, 54.0), "verify": (0, 2.7, 28.0)}
    base.update(cases)
    return {"ranks": ranks, "cases": {k: {"exit": e, "wall_s": w, "peak_rss_mib": m}
                                      for k, (e, w, m) in base.items()}}


class Verdicts(unittest.TestCase):
    def test_runs_within_every_target_pass(self):
        self.assertEqual(set(diff_scale.judge(result()).values()), {"PASS"})

    def test_a_slow_identical_diff_fails_on_its_wall_time(self):
        v = diff_scale.judge(result(identical=(0, 2.5, 49.0)))
        self.assertTrue(v["identical"].startswith("FAIL: 2.50 s > 2 s"), v["identical"])
        self.assertEqual(v["verify"], "PASS")

    def test_memory_over_256_mib_fails(self):
        v = diff_scale.judge(result(verify=(0, 2.7, 300.0)))
        self.assertIn("300 MiB > 256 MiB", v["verify"])

    def test_a_diff_that_misses_the_divergence_fails_however_fast(self):
        v = diff_scale.judge(result(first_step=(0, 0.5, 50.0)))
        self.assertIn("exit 0, expected 1", v["first_step"])

    def test_a_small_run_is_shown_not_judged_but_a_wrong_exit_still_fails(self):
        v = diff_scale.judge(result(ranks=8, identical=(0, 99.0, 999.0)))
        self.assertEqual(v["identical"], "shown")
        v = diff_scale.judge(result(ranks=8, last_step=(0, 0.1, 5.0)))
        self.assertTrue(v["last_step"].startswith("FAIL"))


class SmallRun(unittest.TestCase):
    def test_a_small_run_writes_facts_cases_and_verdicts(self):
        bench = os.environ.get("LOCKSTEP_DIFF_BENCH")
        if not bench:
            self.skipTest("LOCKSTEP_DIFF_BENCH not set (the bench binary; ctest sets it)")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            run = subprocess.run([sys.executable, os.path.join(HERE, "diff_scale.py"), "--bench",
                                  bench, "--ranks", "8", "--repeats", "1", "--dir",
                                  os.path.join(tmp, "runs"), "--json", out],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertEqual(run.returncode, 0, run.stdout)
            with open(out) as f:
                r = json.load(f)
        for key in ("commit", "date", "host_cpus", "load_average_before", "targets"):
            self.assertIn(key, r)
        self.assertEqual(r["ranks"], 8)
        self.assertEqual(r["verdict"], "shown")
        self.assertEqual({c: r["cases"][c]["exit"] for c in diff_scale.TARGETS},
                         {c: e for c, (_, e) in diff_scale.TARGETS.items()})

    def test_no_bench_binary_is_one_line_and_exit_2(self):
        run = subprocess.run([sys.executable, os.path.join(HERE, "diff_scale.py"), "--bench",
                              "/nonexistent/bench"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)


if __name__ == "__main__":
    unittest.main()
