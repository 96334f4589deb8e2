"""tests/gpu/plan.py: each group's time from the newest timed run of each of its checks, and the
groups that fit a session's device time, one CHECKS= per command."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

PLAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plan.py")


def results(folder, name, rows):
    with open(os.path.join(folder, name), "w") as f:
        json.dump({"schema": "lockstep-gpu-results", "version": 1, "rows": [
            dict(zip(("check", "group", "result", "seconds"), r)) if len(r) == 4
            else dict(zip(("check", "group", "result"), r)) for r in rows]}, f)


class Plan(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        results(d, "2026-12-01T0000Z-old-ad.json",
                [("gpu", "a", "PASS", 5.0), ("cuda det", "d", "PASS", 100.0)])
        results(d, "2026-12-02T0000Z-new-de.json",
                [("cuda det", "d", "PASS", 40.0), ("cuda hunt", "d", "SKIP", 0.0),
                 ("gpt det", "e", "PASS", 300.0), ("gpt hunt", "e", "PASS")])
        results(d, "2026-12-03T0000Z-newer-d.json",
                [("cuda hunt", "d", "PASS", 20.0), ("cuda det", "d", "SKIP", 0.0)])
        with open(os.path.join(d, "notes.json"), "w") as f:
            json.dump({"something": "else"}, f)  # not a results JSON: passed over

    def tearDown(self):
        self.dir.cleanup()

    def plan(self, *args):
        return subprocess.run([sys.executable, PLAN, "--results", self.dir.name, *args],
                              capture_output=True, text=True)

    def line(self, out, group):
        return next(l.split() for l in out.splitlines() if l.split()[:1] == [group])

    def test_a_checks_time_is_its_newest_timed_run(self):
        out = self.plan("--checks", "ad").stdout
        self.assertEqual(self.line(out, "d")[:4], ["d", "60", "2", "0"])  # 40 (not 100) + 20
        self.assertEqual(self.line(out, "a")[:2], ["a", "5"])

    def test_a_group_with_an_untimed_check_is_not_planned(self):
        out = self.plan("--checks", "ade").stdout
        self.assertEqual(self.line(out, "e")[:4], ["e", "300", "1", "1"])
        self.assertIn("fits 1500 s: ad (65 s): CHECKS=ad", out)
        self.assertIn("not timed in full yet: e", out)

    def test_groups_fill_the_budget_and_split_by_command(self):
        out = self.plan("--checks", "ad", "--budget", "30").stdout
        self.assertIn("fits 30 s: a (5 s): CHECKS=a", out)
        out = self.plan("--checks", "ad", "--per-command", "50").stdout
        self.assertIn("fits 1500 s: ad (65 s): CHECKS=a CHECKS=d", out)

    def test_a_test_is_one_check_whatever_rows_its_outcome_wrote(self):
        # The launch-bound test wrote "launch-bound overhead" when it failed (420 s, killed at
        # its limit) and its two usual rows since (176 s on the first): one check, its newest
        # time; a row name of an older file without "test" goes over to the test that makes it;
        # a test the suite no longer has is no check at all (not untimed for ever).
        d = self.dir.name
        launch = "test_f_overhead.py::test_f_launch_bound_shim_time_within_targets"
        cost = "test_f_overhead.py::test_f_launch_cost_per_level"
        tested = lambda folder, name, rows: json.dump(
            {"schema": "lockstep-gpu-results", "version": 1,
             "rows": [dict(zip(("check", "group", "result", "seconds", "test"), r))
                      for r in rows]}, open(os.path.join(folder, name), "w"))
        results(d, "2026-12-04T0000Z-older-f.json", [("launch cost", "f", "PASS", 9.0),
                                                     ("overhead full-skip", "f", "PASS")])
        tested(d, "2026-12-05T0000Z-failed-f.json",
               [("launch-bound overhead", "f", "FAIL", 420.0, launch),
                ("launch cost", "f", "PASS", 5.0, cost),
                ("overhead gone", "f", "SKIP", 0.0, "test_f_overhead.py::test_f_no_such_test")])
        tested(d, "2026-12-06T0000Z-passed-f.json",
               [("launch-bound ratios", "f", "PASS", 176.0, launch),
                ("launch-bound self time", "f", "PASS", 0.0, launch)])
        out = self.plan("--checks", "f").stdout
        # 176 + 5, two checks; the old "overhead full-skip" row (no test, never timed) is the
        # one untimed check left.
        self.assertEqual(self.line(out, "f")[:4], ["f", "181", "2", "1"])

    def test_a_check_that_skipped_for_want_of_gpus_does_not_hold_its_group_back(self):
        d = self.dir.name
        results(d, "2026-12-04T0000Z-one-gpu-d.json", [("cuda ddp", "d", "SKIP", 0.0)])
        with open(os.path.join(d, "2026-12-04T0000Z-one-gpu-d.json")) as f:
            doc = json.load(f)
        doc["rows"][0]["figure"] = "1 GPU visible"  # conftest.py's reason (gpu_suite.fewer_gpus)
        with open(os.path.join(d, "2026-12-04T0000Z-one-gpu-d.json"), "w") as f:
            json.dump(doc, f)
        out = self.plan("--checks", "ad").stdout
        self.assertEqual(self.line(out, "d")[:4], ["d", "60", "2", "0"])
        self.assertIn("fits 1500 s: ad (65 s)", out)
        self.assertIn("skipped for want of GPUs when they last ran (two-GPU checks, planned "
                      "where two are lent): d (1)", out)
        # Skipped for another reason (the time budget), it is a check never timed.
        doc["rows"][0]["figure"] = "time budget"
        with open(os.path.join(d, "2026-12-04T0000Z-one-gpu-d.json"), "w") as f:
            json.dump(doc, f)
        out = self.plan("--checks", "ad").stdout
        self.assertEqual(self.line(out, "d")[:4], ["d", "60", "2", "1"])

    def test_bad_input_is_one_line_and_exit_2(self):
        bad = self.plan("--checks", "az")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("no group 'z'", bad.stderr)
        with open(os.path.join(self.dir.name, "2026-12-04T0000Z-broken.json"), "w") as f:
            f.write("{not json")
        broken = self.plan()
        self.assertEqual(broken.returncode, 2)
        self.assertIn("broken.json: not a results JSON", broken.stderr)


if __name__ == "__main__":
    unittest.main()
