"""CPU tests of scripts/perf-table.py: the tables in README.md and docs/performance.md are the
ones results/ gives, and how the latest rows are chosen.

  python3 -m unittest -v test_perf_table      (from tests/gpu/e2e)
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "perf-table.py")
spec = importlib.util.spec_from_file_location("perf_table", SCRIPT)
perf_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(perf_table)


def run(groups, date, commit, rows):
    return {"groups": groups, "date": date, "commit": commit, "gpu": "NVIDIA H200", "gpus": 1,
            "file": f"{date}-{commit}-{groups}.json",
            "rows": [{"check": c, "result": r, "figure": f} for c, r, f in rows]}


class PerfTableTest(unittest.TestCase):
    def test_readme_and_performance_doc_hold_the_tables_results_give(self):
        proc = subprocess.run([sys.executable, SCRIPT, "--check"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout)

    def test_each_group_comes_from_its_newest_run(self):
        old = run("cf", "2026-12-01T00:57:00Z", "aaa", [("hash bench", "FAIL", "slow"),
                                                         ("overhead off", "FAIL", "x1.006")])
        new = run("cf", "2026-12-01T01:02:00Z", "bbb", [("hash bench", "PASS", "fast"),
                                                         ("overhead off", "PASS", "x0.993")])
        two = run("gx", "2026-12-01T00:45:00Z", "ccc", [("ddp untraced", "PASS", "16")])
        first = run("a", "2026-12-01T00:51:00Z", "ddd", [("gpu", "PASS", "1x")])
        picked = perf_table.latest_rows([old, two, new, first])
        self.assertEqual([(r["check"], r["result"], d["commit"]) for r, d in picked],
                         [("gpu", "PASS", "ddd"), ("hash bench", "PASS", "bbb"),
                          ("overhead off", "PASS", "bbb"), ("ddp untraced", "PASS", "ccc")])

    def test_a_check_a_newer_run_gave_is_not_taken_again(self):
        new = run("c", "2026-12-01T01:02:00Z", "new", [("hash bench", "PASS", "fast")])
        old = run("abc", "2026-12-01T00:51:00Z", "old", [("gpu", "PASS", "1x"),
                                                         ("hash bench", "FAIL", "slow")])
        picked = perf_table.latest_rows([old, new])
        self.assertEqual([(r["check"], d["commit"]) for r, d in picked],
                         [("gpu", "old"), ("hash bench", "new")])

    def test_a_rerun_of_some_checks_of_a_group_keeps_the_groups_other_checks(self):
        full = run("f", "2026-12-02T02:38:00Z", "full", [("overhead off", "PASS", "x1.006"),
                                                         ("launch cost", "PASS", "4 us")])
        rerun = run("f", "2026-12-02T02:44:00Z", "rerun", [("overhead off", "PASS", "x1.001")])
        picked = perf_table.latest_rows([full, rerun])
        self.assertEqual([(r["check"], d["commit"]) for r, d in picked],
                         [("overhead off", "rerun"), ("launch cost", "full")])

    def test_a_check_a_newer_run_skipped_keeps_its_last_result(self):
        ran = run("s", "2026-12-03T02:14:00Z", "ran", [("state hunt", "PASS", "found"),
                                                        ("state cost broad", "SKIP", "budget")])
        newer = run("s", "2026-12-03T05:53:00Z", "newer", [("state dates", "PASS", "step 1"),
                                                           ("state hunt", "SKIP", "budget"),
                                                           ("state cost broad", "SKIP", "budget")])
        picked = perf_table.latest_rows([ran, newer])
        self.assertEqual([(r["check"], r["result"], d["commit"]) for r, d in picked],
                         [("state dates", "PASS", "newer"), ("state hunt", "PASS", "ran"),
                          ("state cost broad", "SKIP", "newer")])

    def test_the_key_figure_is_cut_at_its_first_top_level_clause(self):
        self.assertEqual(perf_table.head("x1.004 (target x1.020), 38.6 ms/step (60 chunks, a)"),
                         "x1.004 (target x1.020)")
        self.assertEqual(perf_table.head("shim 1.0 us/step (3.6%, over: README; FAIL); x1.03"),
                         "shim 1.0 us/step (3.6%, over: README; FAIL)")

    def test_stale_tables_are_found_and_rewritten(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        os.makedirs(os.path.join(tmp, "docs"))
        os.makedirs(os.path.join(tmp, "results"))
        for rel, name in (("README.md", "key"), ("docs/performance.md", "full")):
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(f"intro\n<!-- perf-table:{name} begin -->\nold\n"
                        f"<!-- perf-table:{name} end -->\nafter\n")
        doc = run("f", "2026-12-01T01:02:00Z", "abc1234",
                  [("overhead broad", "PASS", "x1.004 (target x1.020), 38.6 ms/step")])
        del doc["file"]
        with open(os.path.join(tmp, "results", "r.json"), "w") as f:
            json.dump(doc, f)
        args = ["--root", tmp, "--results", os.path.join(tmp, "results")]
        self.assertEqual(perf_table.main(args + ["--check"]), 1)
        self.assertEqual(perf_table.main(args), 0)
        self.assertEqual(perf_table.main(args + ["--check"]), 0)
        with open(os.path.join(tmp, "README.md")) as f:
            readme = f.read()
        self.assertIn("| overhead broad | PASS | x1.004 (target x1.020) |", readme)
        self.assertTrue(readme.startswith("intro\n") and readme.endswith("after\n"))
        with open(os.path.join(tmp, "docs", "performance.md")) as f:
            self.assertIn("(../results/r.json)", f.read())

    def test_no_results_is_an_error(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        self.assertEqual(perf_table.main(["--root", tmp, "--results", tmp, "--check"]), 2)


if __name__ == "__main__":
    unittest.main()
