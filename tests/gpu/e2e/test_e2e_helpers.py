"""CPU tests of the GPU end-to-end helpers: check_diff.py, losses.py, metrics_match.py,
out_digests.py,
bench/overhead/overhead.py on stand-ins (fake/), and the examples' profile summary
(examples/pytorch/step_profile.py) and options. The GPU suite itself (run.sh and its pytest
files) is tested in test_gpu_suite.py.

  python3 -m unittest -v test_e2e_helpers      (from tests/gpu/e2e)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FAKE = os.path.join(HERE, "fake")

sys.path.insert(0, HERE)
import check_diff  # noqa: E402
import losses  # noqa: E402
import metrics_match  # noqa: E402
import out_digests  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))
import step_profile  # noqa: E402

ORIGIN = {"rank": 1, "step": 3, "kind": "kernel", "classification": "origin",
          "name": "planted_atomic_sum_squares(float const*, int, float*)",
          "buffer": {"role": "out", "label": "arg2", "bytes": 4}}
RECEIVER = {"rank": 0, "step": 3, "kind": "collective", "name": "ncclAllReduce",
            "classification": "receiver", "buffer": {"role": "out", "label": "recv"}}
SCALE = {"rank": 0, "step": 3, "kind": "gemm", "name": "cublasLtMatmul",
         "classification": "receiver", "buffer": {"role": "in", "label": "A_scale"}}



class MetricsMatchTest(unittest.TestCase):
    SHOW = """r0 step 1 seq 23 stream 2 thread 1 metric cudaMemcpyAsync bytes=4 | payload bytes 36 (0x24 8b c5 39)
r1 step 1 seq 20 stream 2 thread 1 metric cudaMemcpyAsync bytes=4 | payload bytes 1 (0x00 00 00 00)
r0 step 1 seq 30 stream 2 thread 1 metric cudaMemcpyAsync bytes=24 | payload bytes 5 (0x05 00 00 00 00 00)
r0 step 2 seq 42 stream 2 thread 1 metric cudaMemcpyAsync bytes=4 | payload bytes 56 (0x38 fc 17 3a)
r0 step 2 seq 43 stream 2 thread 1 kernel foo grid=1
r0 step 3 seq 50 stream 1 thread 1 metric cudaMemcpyAsync bytes=4 | payload f32 6.9851313 (0x40df8632)
r0 step 4 seq 58 stream 2 thread 1 metric cudaMemcpyAsync bytes=24 | payload f32 0.0019355878, -2362.739, -150832.34, 3.131775, ... (0x3afdb38d c513abd3 c8134c16 40486f00 48b8a2ef 00000000)"""
    OUT = ("step 1 loss 0.000377 loss_hex 39c58b24\nstep 2 loss 0.00058 loss_hex 3a17fc38\n"
           "step 3 loss 6.985131 loss_hex 40df8632\n")

    def test_losses_found_in_order(self):
        traced = metrics_match.traced_metrics(self.SHOW)
        self.assertEqual(traced, ["39c58b24", "00000005", "3a17fc38", "40df8632", "3afdb38d"])
        line = metrics_match.check(metrics_match.printed_losses(self.OUT), traced)
        self.assertTrue(line.startswith("PASS"), line)

    def test_a_wrong_or_missing_loss_fails(self):
        traced = metrics_match.traced_metrics(self.SHOW)
        wrong = self.OUT.replace("3a17fc38", "3a17fc39")
        self.assertIn("step 2", metrics_match.check(metrics_match.printed_losses(wrong), traced))
        swapped = "step 1 loss 0 loss_hex 3a17fc38\nstep 2 loss 0 loss_hex 39c58b24\n"
        self.assertTrue(metrics_match.check(metrics_match.printed_losses(swapped), traced)
                        .startswith("FAIL"))
        self.assertTrue(metrics_match.check([], traced).startswith("FAIL"))

    def test_same_step_needs_each_loss_in_its_own_step(self):
        traced = metrics_match.traced_metrics(self.SHOW, with_steps=True)
        self.assertIn((3, "40df8632"), traced)
        line = metrics_match.check_same_step(metrics_match.printed_losses(self.OUT), traced)
        self.assertTrue(line.startswith("PASS"), line)
        # The loss of step 3 recorded in step 2 (a copy stream that fell behind): named.
        late = self.SHOW.replace("r0 step 3 seq 50", "r0 step 2 seq 50")
        line = metrics_match.check_same_step(metrics_match.printed_losses(self.OUT),
                                             metrics_match.traced_metrics(late, with_steps=True))
        self.assertEqual(line, "FAIL: step 3 loss 40df8632 is in step 2")

class OutDigestsTest(unittest.TestCase):
    SHOW = ("r0 step 1 seq 7 stream 2 thread 1 kernel vectorized_elementwise_kernel<MulFunctor> "
            "grid_x=4 | in arg2 bytes 4096B 1111111111111111 @3+0 | out arg2 bytes 4096B "
            "{d1} @4+0\n"
            "r0 step 1 seq 8 stream 2 thread 1 kernel reduce_kernel<ReduceSum> grid_x=1 | in "
            "arg0 bytes 4096B 2222222222222222 @4+0 | out arg0 bytes 4B 3333333333333333 @5+0\n"
            "r1 step 1 seq 9 stream 2 thread 1 kernel vectorized_elementwise_kernel<MulFunctor> "
            "| out arg2 bytes 4096B 9999999999999999 @4+0\n"
            "r0 step 2 seq 12 stream 2 thread 1 kernel vectorized_elementwise_kernel<MulFunctor> "
            "| out arg2 bytes 4096B {d2} @4+0\n")

    def test_rank_zeros_matching_kernels_outputs_in_order(self):
        text = self.SHOW.format(d1="aaaaaaaaaaaaaaaa", d2="bbbbbbbbbbbbbbbb")
        self.assertEqual(out_digests.out_digests(text, "MulFunctor"),
                         ["aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"])

    def test_equal_lists_pass_and_a_differing_or_missing_digest_fails(self):
        a = out_digests.out_digests(self.SHOW.format(d1="a" * 16, d2="b" * 16), "MulFunctor")
        b = out_digests.out_digests(self.SHOW.format(d1="a" * 16, d2="c" * 16), "MulFunctor")
        self.assertTrue(out_digests.check(a, a, 2).startswith("PASS"))
        self.assertIn("output 2 of 2 differs", out_digests.check(a, b, 2))
        self.assertIn("at least 3", out_digests.check(a, a, 3))
        missing = out_digests.out_digests(self.SHOW.format(d1="-", d2="b" * 16), "MulFunctor")
        self.assertIn("missing", out_digests.check(missing, missing, 1))


class CheckDiffTest(unittest.TestCase):
    def run_check(self, doc, *args, text_before=""):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(text_before + (json.dumps(doc, indent=1) if doc is not None else "garbage"))
        try:
            return check_diff.main([f.name] + list(args))
        finally:
            os.unlink(f.name)

    def divergent(self, *extra):
        return {"schema": "lockstep-diff", "verdict": "divergent", "first_divergence": ORIGIN,
                "culprit_rank": 1, "per_rank": [ORIGIN, RECEIVER] + list(extra)}

    def test_identical(self):
        self.assertEqual(self.run_check({"verdict": "identical"}, "--expect", "identical"), 0)
        self.assertEqual(self.run_check(self.divergent(), "--expect", "identical"), 1)

    def test_origin_expectations(self):
        ok = ["--expect", "divergent", "--step", "3", "--name", "planted_atomic",
              "--classification", "origin", "--rank", "1", "--culprit-rank", "1",
              "--receiver-rank", "0"]
        self.assertEqual(self.run_check(self.divergent(), *ok), 0)
        for wrong in (["--step", "4"], ["--name", "gemm"], ["--classification", "receiver"],
                      ["--rank", "0"], ["--culprit-rank", "0"], ["--receiver-rank", "1"]):
            args = ["--expect", "divergent"] + wrong
            self.assertEqual(self.run_check(self.divergent(), *args), 1, wrong)
        self.assertEqual(self.run_check({"verdict": "identical"}, "--expect", "divergent"), 1)

    def test_buffer_label_on_a_listed_receiver(self):
        args = ["--expect", "divergent", "--step", "3", "--buffer-label", "A_scale",
                "--buffer-op", "cublasLt"]
        self.assertEqual(self.run_check(self.divergent(SCALE), *args), 0)
        self.assertEqual(self.run_check(self.divergent(), *args), 1)

    def test_the_first_divergences_scope_must_match(self):
        scoped = dict(ORIGIN, scope=["GPT (forward)", "blocks.1.mlp (forward)"])
        doc = dict(self.divergent(), first_divergence=scoped)
        args = ["--expect", "divergent", "--scope"]
        self.assertEqual(self.run_check(doc, *args, r"(^| / )blocks\.1\.mlp \(forward\)$"), 0)
        self.assertEqual(self.run_check(doc, *args, r"\(backward\)$"), 1)
        self.assertEqual(self.run_check(self.divergent(), *args, "mlp"), 1)  # no scope at all

    def test_hunt_output_with_braces_before_the_json(self):
        stages = "stage 2 (full): 1.0 s: origin rank 1: void f<{lambda()#1}>\n\n"
        self.assertEqual(self.run_check(self.divergent(), "--expect", "divergent", "--step", "3",
                                        text_before=stages), 0)

    def test_unreadable_report(self):
        self.assertEqual(self.run_check(None, "--expect", "identical"), 2)


class LossesTest(unittest.TestCase):
    def write(self, lines):
        f = tempfile.NamedTemporaryFile("w", suffix=".out", delete=False)
        f.write("header line\n" + "".join(line + "\n" for line in lines))
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_same_and_differ(self):
        a = self.write(["step 1 loss 1.0 loss_hex 3f800000", "step 2 loss 2.0 loss_hex 40000000"])
        b = self.write(["step 1 loss 1.0 loss_hex 3f800000", "step 2 loss 2.0 loss_hex 40000001"])
        self.assertEqual(losses.main([a, a]), 0)
        self.assertEqual(losses.main([a, b]), 1)
        self.assertEqual(losses.main([a, b, "--expect", "differ", "--differ-from-step", "2"]), 0)
        self.assertEqual(losses.main([a, b, "--expect", "differ", "--differ-from-step", "3"]), 1)
        self.assertEqual(losses.main([a, self.write(["nothing"])]), 2)

    def test_ranks_are_separate(self):
        a = self.write(["rank 0 step 1 loss 1 loss_hex 01", "rank 1 step 1 loss 1 loss_hex 02"])
        b = self.write(["rank 0 step 1 loss 1 loss_hex 01", "rank 1 step 1 loss 1 loss_hex 03"])
        self.assertEqual(losses.main([a, b]), 1)


class OverheadShimsTest(unittest.TestCase):
    """bench/overhead/overhead.py --shim: each named shim is run through LOCKSTEP_LIB as its own
    mode, and --self-time-runs gives each mode that many LOCKSTEP_DEBUG runs and their median."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def stand_in(self, name, text):
        """A stand-in shim: a file holding the self times the fake lockstep reports for it."""
        path = os.path.join(self.tmp, f"{name}.so")
        with open(path, "w") as f:
            f.write(text)
        return path

    def overhead(self, *args, env=None):
        """overhead.py on the launch-bound size with --self-time, with the fake lockstep and
        python; (the process, its rows by mode)."""
        out = os.path.join(self.tmp, "o.json")
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "bench", "overhead", "overhead.py"),
             "--lockstep", os.path.join(FAKE, "lockstep"), "--python", os.path.join(FAKE, "python"),
             "--rounds", "1", "--steps", "6", "--skip", "1", "--size", "launch-bound",
             "--self-time", "--cpus", "all", "--json", out, *args],
            env=dict(os.environ, **(env or {})), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:])
        with open(out) as f:
            return proc, {row["mode"]: row for row in json.load(f)["rows"]}

    def test_each_shim_is_its_own_mode_with_the_median_of_its_runs(self):
        a, b = self.stand_in("a", "100"), self.stand_in("b", "300")
        proc, rows = self.overhead("--levels", "broad,broad@a,broad@b", "--shim", f"a={a}",
                                   "--shim", f"b={b}", "--self-time-runs", "3",
                                   env={"FAKE_SELF_US": "50"})
        for mode, us in (("broad", 50.0), ("broad@a", 100.0), ("broad@b", 300.0)):
            self.assertEqual(rows[mode]["shim_self_us_runs"], [us] * 3, rows[mode])
            self.assertEqual(rows[mode]["shim_self_us_per_step"], us)
            self.assertEqual(rows[mode]["target_ratio"], 1.01)
        self.assertIn("runs: 100.0 100.0 100.0 us", proc.stdout)

    def test_two_builds_are_told_apart_only_when_their_paired_runs_interval_excludes_zero(self):
        # This build's broad runs in turn with another build's (broad@old): the difference is
        # taken round by round. Every round 50 us lower: told apart. Rounds lower and higher
        # (median -1, 7 rounds: their whole range, -3 to +5): not told apart.
        mine = "50,60,40,55,45,52,48"
        for old, median, low, high, lower, apart in (
                ("100 110 90 105 95 102 98", -50.0, -50.0, -50.0, 7, True),
                ("48 62 41 50 47 55 45", -1.0, -3.0, 5.0, 4, False)):
            counter = os.path.join(self.tmp, "mine.runs")
            if os.path.exists(counter):
                os.remove(counter)
            proc, rows = self.overhead(
                "--levels", "broad,broad@old", "--self-time-runs", "7",
                "--shim", f"old={self.stand_in('old', old)}",
                env={"FAKE_SELF_US": mine, "FAKE_SELF_COUNTER": counter})
            os.remove(os.path.join(self.tmp, "old.so.runs"))
            pair = rows["broad@old"]["shim_self_paired"]
            self.assertEqual((pair["mode"], pair["runs"], pair["median"], pair["interval"],
                              pair["lower"], pair["told_apart"]),
                             ("broad", 7, median, [low, high], lower, apart), pair)
            self.assertIsNone(rows["broad"]["shim_self_paired"])
            verdict = "told apart" if apart else "not told apart"
            self.assertIn(f"broad - broad@old: median {median:+.1f} us [{low:+.1f}, {high:+.1f}], "
                          f"broad lower in {lower} of 7 rounds: {verdict}", proc.stdout)

    def test_two_builds_are_also_compared_per_microsecond_of_the_jobs_own_real_calls(self):
        # The host's speed drifts run to run, and the shim's time with the job's own real calls.
        # This build spends 0.20 us per us of real calls every run, the other 0.21-0.22: per real
        # call it is lower every round (told apart), while the raw differences (-20 to +10 us)
        # are not told apart.
        counter = os.path.join(self.tmp, "mine.runs")
        old = self.stand_in("old", "110 190 170 130 200\n5000 9000 8000 6000 9500\n")
        proc, rows = self.overhead(
            "--levels", "broad,broad@old", "--self-time-runs", "5", "--shim", f"old={old}",
            env={"FAKE_SELF_US": "100 200 150 120 180", "FAKE_SELF_COUNTER": counter,
                 "FAKE_REAL_CALL_NS": "5000 10000 7500 6000 9000"})
        raw = rows["broad@old"]["shim_self_paired"]
        self.assertEqual((raw["median"], raw["interval"], raw["told_apart"]),
                         (-10.0, [-20.0, 10.0], False), raw)
        pair = rows["broad@old"]["shim_self_paired_per_real_call"]
        self.assertEqual((pair["mode"], pair["runs"], pair["lower"], pair["told_apart"]),
                         ("broad", 5, 5, True), pair)
        self.assertAlmostEqual(pair["median"], 0.2 / (170 / 800) - 1, places=9)
        self.assertAlmostEqual(pair["interval"][0], 0.2 / 0.22 - 1, places=9)
        self.assertAlmostEqual(pair["interval"][1], 0.2 / (200 / 950) - 1, places=9)
        self.assertIsNone(rows["broad"]["shim_self_paired_per_real_call"])
        self.assertIn("per the job's own real-call time: broad / broad@old: median -5.9% "
                      "[-9.1%, -5.0%], broad lower in 5 of 5 rounds: told apart", proc.stdout)

    def test_the_self_time_verdict_comes_from_the_interval_of_its_runs(self):
        # The fake job's step is 10 ms: 100 us of shim time is broad's 1% goal. Runs all under
        # it pass, runs on both sides of it are within noise (KNOWN, even with the median over
        # it), runs all over it fail (even with one a hair over).
        shims = {"under": "60 80 70", "around": "90 130 120", "over": "101 160 150"}
        proc, rows = self.overhead(
            "--levels", ",".join(f"broad@{name}" for name in shims), "--self-time-runs", "3",
            *[arg for name, runs in shims.items()
              for arg in ("--shim", f"{name}={self.stand_in(name, runs)}")])
        for name, verdict, low, high in (("under", "PASS", 0.6, 0.8),
                                         ("around", "KNOWN", 0.9, 1.3),
                                         ("over", "FAIL", 1.01, 1.6)):
            row = rows[f"broad@{name}"]
            self.assertEqual(row["shim_self_verdict"], verdict, row)
            self.assertEqual(row["shim_self_within_target"],
                             {"PASS": True, "FAIL": False}.get(verdict), row)
            self.assertAlmostEqual(100 * row["shim_self_share_interval"][0], low, delta=0.01)
            self.assertAlmostEqual(100 * row["shim_self_share_interval"][1], high, delta=0.01)
        self.assertRegex(proc.stdout, r"broad@around +120\.0 us +1\.20% of the untraced step "
                                      r"\[0\.90-1\.30%\] +target 1\.0% ~")

    def test_the_in_run_share_takes_each_runs_own_step_as_its_reference(self):
        # Three LOCKSTEP_DEBUG runs on a host whose speed drifts: the shim's time and the job's
        # step move together (100 us of a 20 ms step, 200 of 40, 150 of 30). Against the
        # untraced job's 10 ms step they read 1-2%; each against its own step less its shim
        # time, 0.50% every run.
        counter = os.path.join(self.tmp, "runs")
        proc, rows = self.overhead(
            "--levels", "broad", "--self-time-runs", "3",
            env={"FAKE_SELF_US": "100 200 150", "FAKE_SELF_COUNTER": counter,
                 "FAKE_STEP_S_CYCLE": "0.0201,0.0402,0.03015",
                 "FAKE_RUN_COUNTER": os.path.join(self.tmp, "steps")})
        row = rows["broad"]
        self.assertEqual(row["shim_self_step_ms_runs"], [20.1, 40.2, 30.15])
        self.assertAlmostEqual(100 * row["shim_self_own_share"], 0.5, places=6)
        self.assertEqual([round(100 * x, 6) for x in row["shim_self_own_share_interval"]],
                         [0.5, 0.5])
        self.assertEqual(row["shim_self_own_verdict"], "PASS")
        # The reading against the untraced step, as before: 1.50% [1.00-2.00], at the target.
        self.assertEqual(row["shim_self_verdict"], "KNOWN")
        self.assertEqual([round(100 * x, 6) for x in row["shim_self_share_interval"]], [1.0, 2.0])
        self.assertIn("in-run: 0.50% [0.50-0.50%] of each run's own step less its shim time yes "
                      "(steps 20.10 40.20 30.15 ms)", proc.stdout)

    def test_the_rest_of_the_step_is_what_no_timed_call_holds(self):
        # Two LOCKSTEP_DEBUG runs: steps of 20.1 and 30.1 ms, the shim's 100 us, the job's real
        # calls 100 a step of 50 us (5 ms) and its allocation calls 50 a step of 20 us (1 ms):
        # 14.0 and 24.0 ms of the job's own host code, their median 19.0.
        counter = os.path.join(self.tmp, "runs")
        proc, rows = self.overhead(
            "--levels", "full", "--self-time-runs", "2",
            env={"FAKE_SELF_US": "100", "FAKE_REAL_CALL_NS": "50000,50000",
                 "FAKE_ALLOC_CALL_NS": "20000", "FAKE_SELF_COUNTER": counter,
                 "FAKE_STEP_S_CYCLE": "0.0201,0.0301",
                 "FAKE_RUN_COUNTER": os.path.join(self.tmp, "steps")})
        row = rows["full"]
        self.assertEqual(row["rest_of_step_ms_runs"], [14.0, 24.0])
        self.assertAlmostEqual(row["rest_of_step_ms"], 19.0, places=6)
        self.assertIn("rest of the step: 19.00 ms (outside the shim, its real calls and alloc "
                      "calls: the job's own host code; runs 14.00 24.00)", proc.stdout)

    def test_a_build_tree_runs_its_mode_through_its_own_cli(self):
        # A folder with tools/lockstep: that CLI runs the mode (with its shim and Python hooks),
        # not the --lockstep one, and LOCKSTEP_LIB is left alone.
        os.makedirs(os.path.join(self.tmp, "tree", "tools"))
        cli = os.path.join(self.tmp, "tree", "tools", "lockstep")
        with open(cli, "w") as f:
            f.write(f'#!/bin/sh\n[ -z "$LOCKSTEP_LIB" ] || exit 9\n'
                    f'FAKE_SELF_US=200 exec {os.path.join(FAKE, "lockstep")} "$@"\n')
        os.chmod(cli, 0o755)
        _, rows = self.overhead("--levels", "broad,broad@tree", "--shim",
                                f"tree={self.tmp}/tree", "--self-time-runs", "2",
                                env={"FAKE_SELF_US": "50"})
        self.assertEqual(rows["broad"]["shim_self_us_runs"], [50.0] * 2)
        self.assertEqual(rows["broad@tree"]["shim_self_us_runs"], [200.0] * 2)

    def test_the_self_time_runs_take_turns_first(self):
        # One list of self times handed out in the order the runs happen: with two modes and
        # two rounds, each mode runs first once (a fixed order gives broad 10, 30).
        _, rows = self.overhead("--levels", "broad,metrics", "--self-time-runs", "2",
                                env={"FAKE_SELF_US": "10 20 30 40",
                                     "FAKE_SELF_COUNTER": os.path.join(self.tmp, "runs")})
        self.assertEqual(rows["broad"]["shim_self_us_runs"], [10.0, 40.0])
        self.assertEqual(rows["metrics"]["shim_self_us_runs"], [20.0, 30.0])

    def test_a_shim_that_is_not_there_is_refused(self):
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "bench", "overhead", "overhead.py"),
             "--lockstep", os.path.join(FAKE, "lockstep"), "--shim", "a=/nonexistent/x.so"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stdout)
        self.assertIn("no such file", proc.stdout)


class PairedModesTest(unittest.TestCase):
    """tests/gpu/gpu_suite.paired_modes: two modes of one overhead.py run judged against each
    other by the interval of their paired turns, not by the ratio of their medians."""

    def judge(self, mine, theirs):
        sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
        import gpu_suite
        return gpu_suite.paired_modes({"chunk_medians_ms": mine}, {"chunk_medians_ms": theirs},
                                      1.005, 1.10)

    def test_turns_that_disagree_are_within_noise_even_when_the_medians_ratio_is_under(self):
        # Eleven rounds, the last five in a slow phase of the host that costs the scopes more:
        # the medians are 97 against 100 (x0.97, under the x1.005 target), but the paired turns
        # read x0.97 six times and x1.05 five times: their interval straddles the target.
        mine = [97] * 6 + [126] * 5
        theirs = [100] * 6 + [120] * 5
        pair = self.judge(mine, theirs)
        self.assertEqual(pair["result"], "KNOWN", pair)
        self.assertEqual(pair["turns"], 11)
        self.assertAlmostEqual(pair["ratio"], 0.97)
        self.assertAlmostEqual(pair["interval"][0], 0.97)
        self.assertAlmostEqual(pair["interval"][1], 1.05)

    def test_turns_all_under_the_target_pass_and_all_over_the_limit_fail(self):
        slow = [100 + i for i in range(10)]
        self.assertEqual(self.judge([t * 1.002 for t in slow], slow)["result"], "PASS")
        self.assertEqual(self.judge([t * 1.2 for t in slow], slow)["result"], "FAIL")
        self.assertIsNone(self.judge([], slow))


class AddressRepeatsTest(unittest.TestCase):
    """bench/overhead/address_repeats.py: which ops of a step repeat the step before's."""

    def setUp(self):
        sys.path.insert(0, os.path.join(ROOT, "bench", "overhead"))
        import address_repeats
        self.bench = address_repeats

    def test_an_op_repeats_only_with_the_same_name_and_the_same_tensors(self):
        mm, add = "aten.mm.default", "aten.add.Tensor"
        a, b, c = (0x1000, 0, (4, 4)), (0x2000, 0, (4, 4)), (0x3000, 0, (4, 4))
        steps = [[(mm, (a, b)), (add, (b, c))],
                 [(mm, (a, b)), (add, (c, b))],   # the add's tensors in another order
                 [(add, (c, b)), (mm, (a, c))]]   # moved, and the mm's output elsewhere
        rows = self.bench.compare_steps(steps)
        self.assertEqual(rows, [{"step": 2, "ops": 2, "same_index": 1, "anywhere": 1},
                                {"step": 3, "ops": 2, "same_index": 0, "anywhere": 1}])

    def test_the_share_is_the_median_from_step_three(self):
        rows = [{"step": 2, "ops": 10, "same_index": 10, "anywhere": 10},
                {"step": 3, "ops": 10, "same_index": 1, "anywhere": 2},
                {"step": 4, "ops": 10, "same_index": 3, "anywhere": 4},
                {"step": 5, "ops": 10, "same_index": 2, "anywhere": 9}]
        self.assertAlmostEqual(self.bench.share(rows, "same_index"), 20.0)
        self.assertAlmostEqual(self.bench.share(rows, "anywhere"), 40.0)
        self.assertIsNone(self.bench.share(rows[:1], "anywhere"))


class OverheadFactsTest(unittest.TestCase):
    """bench/overhead/overhead.py --json says what it ran on (bench/overhead/run_facts.py)."""

    def test_the_json_holds_commit_gpu_driver_and_date(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        out = os.path.join(tmp, "o.json")
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "bench", "overhead", "overhead.py"),
             "--lockstep", os.path.join(FAKE, "lockstep"), "--python", os.path.join(FAKE, "python"),
             "--levels", "broad", "--interleave", "runs", "--rounds", "1", "--steps", "4",
             "--skip", "1", "--cpus", "all", "--json", out],
            env=dict(os.environ, LOCKSTEP_COMMIT="abc1234",
                     PATH=FAKE + os.pathsep + os.environ["PATH"]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:])
        with open(out) as f:
            doc = json.load(f)
        self.assertEqual((doc["commit"], doc["gpu"], doc["driver"]),
                         ("abc1234", "NVIDIA H200", "580.159"))
        self.assertRegex(doc["date"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


class OverheadRoundsTest(unittest.TestCase):
    """bench/overhead/overhead.py --max-rounds: rounds past --rounds while some mode's runs spread
    by more than --spread, and only then."""

    def run_overhead(self, cycle):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        out = os.path.join(tmp, "o.json")
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "bench", "overhead", "overhead.py"),
             "--lockstep", os.path.join(FAKE, "lockstep"), "--python", os.path.join(FAKE, "python"),
             "--levels", "broad", "--interleave", "runs", "--rounds", "2", "--max-rounds", "4",
             "--steps", "6",
             "--skip", "1", "--cpus", "all", "--json", out],
            env=dict(os.environ, FAKE_STEP_S_CYCLE=cycle,
                     FAKE_RUN_COUNTER=os.path.join(tmp, "runs")),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:])
        with open(out) as f:
            return json.load(f), proc.stdout

    def test_runs_that_agree_take_the_rounds_asked_for(self):
        result, _ = self.run_overhead("0.010")
        self.assertEqual(result["rounds"], 2)
        self.assertEqual(result["widest_spread"], 0.0)

    def test_runs_that_spread_take_more_rounds_up_to_the_limit(self):
        # Runs alternate 10 and 12 ms: every mode spreads by 20% once it has two runs.
        result, text = self.run_overhead("0.010,0.012")
        self.assertEqual(result["rounds"], 4)
        for row in result["rows"]:
            self.assertEqual(len(row["run_medians_ms"]), 4, row)
        self.assertAlmostEqual(result["widest_spread"], 0.2, places=6)
        self.assertIn("4 rounds (of 2 to 4: more while some mode's runs spread by more than 5%)",
                      text)


class OverheadChunksTest(unittest.TestCase):
    """bench/overhead/overhead.py --interleave chunks (the default): one gated job per mode, the
    modes taking turns of a few steps. The stand-in machine is slow (x1.3) every other round of
    turns: a slow phase falls on every mode alike, so the ratios are the modes' own."""

    def run_overhead(self, factors, *args, **env):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        out = os.path.join(tmp, "o.json")
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "bench", "overhead", "overhead.py"),
             "--lockstep", os.path.join(FAKE, "lockstep"), "--python", os.path.join(FAKE, "python"),
             "--levels", env.pop("LEVELS", "off,broad"), "--chunks", env.pop("CHUNKS", "8"),
             "--chunk-steps", "3", "--skip", "2",
             "--sets", env.pop("SETS", "1"), "--cpus", "all", "--timeout", env.pop("TIMEOUT", "20"),
             "--json", out, *args],
            env=dict(os.environ, **dict(dict(FAKE_PHASE_S="0.010,0.013", FAKE_PHASE_CHUNKS="3",
                                             FAKE_TURN_COUNTER=os.path.join(tmp, "turns"),
                                             FAKE_FACTORS=factors), **env)),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        with open(out) as f:
            result = json.load(f)
        return proc, {row["mode"]: row for row in result["rows"]}, result, \
            time.monotonic() - started

    def test_slow_phases_fall_on_every_mode_alike(self):
        proc, rows, result, _ = self.run_overhead("broad=1.008")
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:])
        self.assertEqual(result["interleave"], "chunks")
        # Each mode's turns alternate between the fast and the slow phase.
        self.assertEqual(rows["untraced"]["chunk_medians_ms"], [13.0, 10.0] * 4)
        self.assertAlmostEqual(rows["off"]["ratio"], 1.0, places=9)
        self.assertAlmostEqual(rows["broad"]["ratio"], 1.008, places=9)
        self.assertTrue(rows["broad"]["within_target"])
        self.assertEqual(len(rows["broad"]["chunk_ratio_quartiles"]), 2)
        for q in rows["broad"]["chunk_ratio_quartiles"]:
            self.assertAlmostEqual(q, 1.008, places=9)
        self.assertIn("8 chunks, ratio IQR 1.008-1.008, sets 1.008", proc.stdout)

    def test_a_process_slower_as_a_whole_shows_as_sets_that_disagree(self):
        procs = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, procs, ignore_errors=True)
        proc, rows, result, _ = self.run_overhead(
            "", SETS="2", FAKE_PHASE_S="0.010", FAKE_FIRST_FACTORS="broad=1.1",
            FAKE_PROCESS_DIR=procs)
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:])
        self.assertEqual(result["sets"], 2)
        self.assertEqual(len(rows["broad"]["chunk_medians_ms"]), 16)
        self.assertEqual([round(r, 6) for r in rows["broad"]["set_ratios"]], [1.1, 1.0])
        self.assertEqual([round(r, 6) for r in rows["off"]["set_ratios"]], [1.0, 1.0])
        self.assertIn("16 chunks, ratio IQR 1.000-1.100, sets 1.100 1.000", proc.stdout)
        # Sets that disagree across broad's target: within noise of it, neither PASS nor FAIL.
        self.assertEqual([round(r, 6) for r in rows["broad"]["ratio_interval"]], [1.0, 1.1])
        self.assertEqual(rows["broad"]["verdict"], "KNOWN")
        self.assertIsNone(rows["broad"]["within_target"])
        self.assertEqual(rows["off"]["verdict"], "PASS")

    def test_the_ratio_pairs_turns_where_pooled_medians_draw_unevenly(self):
        # Phases of 4 turns against rounds of 3: broad happens to draw more slow turns, and its
        # pooled median is a slow step (x1.3 "overhead" that is not there); the median of its
        # turns' ratios to the untraced turns of their rounds is 1. The turns that paired
        # across a phase change (x1.3) stay in the ratio's interval: within noise of the
        # target, not a FAIL on the pooled x1.3.
        proc, rows, _, _ = self.run_overhead("", FAKE_PHASE_CHUNKS="4", CHUNKS="12")
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:])
        self.assertAlmostEqual(rows["broad"]["pooled_ratio"], 1.3, places=9)
        self.assertAlmostEqual(rows["broad"]["ratio"], 1.0, places=9)
        self.assertEqual([round(r, 6) for r in rows["broad"]["ratio_interval"]], [1.0, 1.3])
        self.assertEqual(rows["broad"]["verdict"], "KNOWN")

    def test_another_shims_mode_is_compared_turn_by_turn_with_this_builds(self):
        # broad@old's shim makes the job 5% slower: each round's broad turn over its broad@old
        # turn is 1/1.05 - 1 whichever phase the round fell in (told apart), while each mode's
        # ratio to untraced carries the phases' noise.
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        old = os.path.join(tmp, "old.so")  # a stand-in shim: the self time it reports
        with open(old, "w") as f:
            f.write("100\n")
        proc, rows, _, _ = self.run_overhead("broad=1.2", "--shim", f"old={old}",
                                             LEVELS="broad,broad@old",
                                             FAKE_LIB_FACTORS="old.so=1.05")
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:])
        pair = rows["broad@old"]["wall_paired"]
        self.assertEqual((pair["mode"], pair["runs"], pair["lower"], pair["told_apart"]),
                         ("broad", 8, 8, True), pair)
        self.assertAlmostEqual(pair["median"], 1 / 1.05 - 1, places=9)
        self.assertIsNone(rows["broad"]["wall_paired"])
        self.assertIn("step, turn by turn: broad / broad@old: median -4.8% [-4.8%, -4.8%], "
                      "broad lower in 8 of 8 rounds: told apart", proc.stdout)

    def test_a_mode_over_its_target_is_flagged(self):
        proc, rows, _, _ = self.run_overhead("off=1.02,broad=1.1")
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:])
        self.assertFalse(rows["off"]["within_target"])
        self.assertFalse(rows["broad"]["within_target"])
        self.assertEqual(rows["broad"]["verdict"], "FAIL")
        self.assertAlmostEqual(rows["broad"]["ratio"], 1.1, places=9)

    def test_a_job_that_dies_is_an_error_not_a_hang(self):
        # One phase: with a job gone, the rounds are shorter than the stand-in's phases.
        proc, rows, result, seconds = self.run_overhead("", FAKE_DIE_LEVEL="broad",
                                                        FAKE_PHASE_S="0.010")
        self.assertEqual(proc.returncode, 1, proc.stdout[-3000:])
        self.assertLess(seconds, 15)  # found within a second of the exit, not at --timeout
        self.assertIn("broad-set0: exit 1 before its steps were done", proc.stdout)
        self.assertIsNone(rows["broad"]["ratio"])
        self.assertAlmostEqual(rows["off"]["ratio"], 1.0, places=9)


    def test_a_job_that_hangs_is_killed_with_its_processes(self):
        pid_file = os.path.join(tempfile.mkdtemp(), "pid")
        self.addCleanup(shutil.rmtree, os.path.dirname(pid_file), ignore_errors=True)
        proc, rows, _, seconds = self.run_overhead(
            "", FAKE_HANG_LEVEL="broad", FAKE_HANG_PID=pid_file, FAKE_PHASE_S="0.010",
            TIMEOUT="3")
        self.assertEqual(proc.returncode, 1, proc.stdout[-3000:])
        self.assertIn("broad-set0: no step done within 3 s", proc.stdout)
        self.assertLess(seconds, 20)
        self.assertAlmostEqual(rows["off"]["ratio"], 1.0, places=9)
        with open(pid_file) as f:
            pid = int(f.read())
        # The job's own process (under the stand-in `lockstep run`) went with the group: gone,
        # or a zombie until whoever adopted it reaps it.
        def alive():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                return False
        self.assertFalse(alive(), f"process {pid} survived")


class StepProfileTest(unittest.TestCase):
    """examples/pytorch/step_profile.py's summary of a torch.profiler run, on stand-in events."""

    class Event:
        def __init__(self, key, us, count, device="DeviceType.CUDA", annotation=False,
                     cpu_us=0):
            self.key, self.self_device_time_total, self.count = key, us, count
            self.device_type, self.is_user_annotation = device, annotation
            self.self_cpu_time_total = cpu_us

    def summary(self, events, steps):
        profiler = type("Profiler", (), {"key_averages": lambda _: events})()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "profile.txt")
            step_profile.write_profile(path, profiler, steps, 0.1)
            with open(path) as f:
                return f.read().splitlines()

    def test_hash_and_nccl_apart_annotations_and_host_ops_not_summed(self):
        E = self.Event
        lines = self.summary([
            E("nccl:all_reduce", 9000, 8, annotation=True),  # spans the NCCL kernel below
            E("Optimizer.step#AdamW.step", 5000, 2),  # annotation known by its name
            E("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 3000, 4),
            E("nvjet_gemm", 1000, 8),
            E("lsf1_batch_small", 400, 8),
            E("lsf1_compact_small", 200, 16),
            E("aten::mm", 7000, 8, device="DeviceType.CPU"),
            E("cudaMemcpyAsync", 0, 6, device="DeviceType.CPU", cpu_us=3000),
            E("cudaStreamSynchronize", 0, 2, device="DeviceType.CPU", cpu_us=1000),
            E("cudaLaunchKernel", 0, 40, device="DeviceType.CPU", cpu_us=500),  # not a wait
        ], steps=2)
        self.assertEqual(lines[0], "profiled steps 2, wall 50.000 ms/step")
        self.assertEqual(lines[1], "job device time 2.000 ms/step in 6 kernels/copies per step")
        self.assertEqual(lines[2], "hash device time 0.300 ms/step in 12 launches per step")
        self.assertTrue(lines[3].startswith("host in device-waiting runtime calls 2.000 ms/step "
                                            "in 4 calls per step"), lines[3])
        self.assertTrue(lines[4].startswith("of the job's, NCCL kernels 1.500 ms/step in 2 "))
        self.assertIn("nccl:all_reduce  (annotation, not summed)", "\n".join(lines))
        self.assertNotIn("aten::mm", "\n".join(lines))

    def test_rank_path(self):
        self.assertEqual(step_profile.rank_path("/t/p.txt", 1), "/t/p.txt.rank1")
        self.assertEqual(step_profile.rank_path("/t/p.{rank}.txt", 3), "/t/p.3.txt")
        self.assertIsNone(step_profile.rank_path(None, 0))

    def test_profiles_only_the_last_steps(self):
        one = step_profile.StepProfile("/t/p.txt", 14)
        self.assertEqual((one.first, one.steps), (11, 4))
        short = step_profile.StepProfile("/t/p.txt", 3)  # never step 1
        self.assertEqual((short.first, short.steps), (2, 2))
        self.assertEqual(step_profile.StepProfile("/t/p.txt", 8, rank=1).path, "/t/p.txt.rank1")
        off = step_profile.StepProfile(None, 8)
        off.before_step(off.first)  # no path: nothing starts (torch is not even imported)
        off.finish()
        self.assertIsNone(off.profiler)


class ExampleArgumentsTest(unittest.TestCase):
    """The examples' --gate and --profile come from step_gate.py and step_profile.py; --help
    needs no torch, so a broken import or option shows here on the CPU."""

    def test_every_example_takes_gate_and_profile(self):
        for script, per_rank in (("train_gpt.py", False), ("train_ddp.py", True),
                                 ("train_tp_dp.py", True)):
            out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "pytorch", script),
                                  "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stdout)
            text = " ".join(out.stdout.split())
            self.assertIn("--gate DIR wait between chunks of steps", text, script)
            self.assertIn("--profile FILE profile the last 4 steps", text, script)
            self.assertEqual("to FILE ('{rank}' in the name is replaced" in text, per_rank, script)


if __name__ == "__main__":
    unittest.main()
