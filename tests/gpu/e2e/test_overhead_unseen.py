"""CPU tests of issue #34's pieces of the overhead benchmark: overhead.py's verdict from a
ratio's interval (PASS, FAIL, within noise: KNOWN), its targets by job (full x1.25 on the
gpu-bound GPT job, x1.30 with attention written out, x1.5 on the unseen job), `--job unseen` run
against the stand-ins (fake/), and bench/overhead/train_unseen.py: its arguments and its exits
without torch or CUDA (a stand-in torch module), its schedule, and, where a real PyTorch 2.5+ is
importable, a tiny CPU smoke run (forward, backward, two steps, bit-identical twice).

  python3 -m unittest -v test_overhead_unseen      (from tests/gpu/e2e)
"""

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FAKE = os.path.join(HERE, "fake")
BENCH = os.path.join(ROOT, "bench", "overhead")
OVERHEAD = os.path.join(BENCH, "overhead.py")
TRAIN = os.path.join(BENCH, "train_unseen.py")

sys.path.insert(0, BENCH)
import overhead  # noqa: E402


def load_train_unseen():
    """bench/overhead/train_unseen.py as a module (its arguments and schedule need no torch)."""
    spec = importlib.util.spec_from_file_location("train_unseen", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def real_torch_for_smoke():
    """Why the CPU smoke cannot run here, or None when a PyTorch 2.5+ is importable."""
    probe = ("import torch; "
             "v = tuple(int(x) for x in torch.__version__.split('+')[0].split('.')[:2]); "
             "assert v >= (2, 5) and hasattr(torch.nn, 'RMSNorm'), v")
    try:
        proc = subprocess.run([sys.executable, "-c", probe], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return f"no PyTorch probe: {e}"
    if proc.returncode != 0:
        return "no PyTorch 2.5+ importable here (the model needs RMSNorm and enable_gqa)"
    return None


class IntervalVerdictTest(unittest.TestCase):
    """overhead.py judges a ratio by its interval, never by one median on the threshold."""

    def test_the_median_interval_takes_the_textbook_order_statistics(self):
        # Distribution-free 95% intervals for the median (order statistics, 1-based): n=6..8 the
        # whole range, n=9 x(2)-x(8), n=10 x(2)-x(9), n=20 x(6)-x(15).
        for n, (lo, hi) in ((6, (1, 6)), (8, (1, 8)), (9, (2, 8)), (10, (2, 9)),
                            (20, (6, 15))):
            values = [float(v) for v in range(n, 0, -1)]  # unsorted on purpose
            self.assertEqual(overhead.median_interval(values), (float(lo), float(hi)), n)

    def test_few_values_give_their_whole_range_and_none_gives_nothing(self):
        self.assertEqual(overhead.median_interval([1.2, 1.1, 1.3]), (1.1, 1.3))
        self.assertEqual(overhead.median_interval([1.4]), (1.4, 1.4))
        self.assertIsNone(overhead.median_interval([]))

    def test_an_interval_within_the_target_passes(self):
        self.assertEqual(overhead.verdict((1.10, 1.25), 1.25), "PASS")

    def test_an_interval_above_the_target_fails(self):
        self.assertEqual(overhead.verdict((1.26, 1.40), 1.25), "FAIL")

    def test_an_interval_across_the_target_is_within_noise(self):
        # The median (1.24) is under the target, but the turns do not say which side it is on.
        self.assertEqual(overhead.verdict((1.20, 1.30), 1.25), "KNOWN")
        self.assertEqual(overhead.verdict((1.25, 1.30), 1.25), "KNOWN")

    def test_no_target_or_no_interval_gives_no_verdict(self):
        self.assertIsNone(overhead.verdict((1.0, 1.1), None))
        self.assertIsNone(overhead.verdict(None, 1.5))


class TargetsByJobTest(unittest.TestCase):
    """full's target comes from the job and size (issue #34); off, metrics and broad's do not."""

    def target(self, mode, *argv):
        return overhead.target_of(overhead.parse_args(["--lockstep", "x", *argv]), mode)

    def test_full_targets_follow_the_job(self):
        self.assertEqual(self.target("full"), 1.25)  # gpt, gpu-bound by default
        self.assertEqual(self.target("full", "--size", "gpu-bound-explicit"), 1.30)
        self.assertEqual(self.target("full", "--job", "unseen"), 1.5)
        self.assertEqual(self.target("full", "--size", "launch-bound"), 1.5)
        self.assertEqual(self.target("full", "--job", "ddp"), 1.5)
        self.assertEqual(self.target("full", "--", "--dim", "64"), 1.5)  # its own arguments

    def test_modes_at_full_with_a_target_share_the_jobs(self):
        self.assertEqual(self.target("full-caching"), 1.25)
        self.assertIsNone(self.target("full-nocache"))
        self.assertIsNone(self.target("full-64B"))

    def test_the_small_levels_have_the_same_targets_on_every_job(self):
        # broad: issue #34's x1.01 (and 1.0% of the step for the shim's own time).
        for job in ("gpt", "unseen"):
            self.assertEqual([self.target(m, "--job", job) for m in ("off", "metrics", "broad")],
                             [1.005, 1.01, 1.01])

class SelfTimePhasesTest(unittest.TestCase):
    """--self-time reads where the shim's time went (LOCKSTEP_DEBUG's phase line) per step, of
    the rank whose total is largest: the per-call cost before and after a change, as data."""

    OUTPUT = (
        "lockstep[0]: debug: shim self time: call begin 6000 x 200 ns (+12 slow, 40.1 ms), "
        "call end 6000 x 100 ns, marker 20 x 5000 ns; timing taken out: 9 ns per nested phase\n"
        "lockstep[0]: debug: shim self time per step: 310.0 us steady (20 steps), 40.1 ms in "
        "slow first calls\n"
        "lockstep[1]: debug: shim self time: call begin 9000 x 200 ns, call end 9000 x 100 ns; "
        "timing taken out: 9 ns per nested phase\n"
        "lockstep[1]: debug: shim self time per step: 450.0 us steady (30 steps), 0.0 ms in "
        "slow first calls\n")

    def test_the_largest_ranks_total_is_the_figure(self):
        self.assertEqual(overhead.self_time_us(self.OUTPUT), 450.0)

    def test_phases_are_per_step_of_that_rank_and_slow_calls_stay_apart(self):
        phases = overhead.self_time_phases(self.OUTPUT)
        self.assertEqual(sorted(phases), ["call begin", "call end"])  # rank 1's line
        self.assertEqual(phases["call begin"]["calls_per_step"], 300)
        self.assertEqual(phases["call begin"]["ns_per_call"], 200)
        self.assertAlmostEqual(phases["call end"]["us_per_step"], 30.0)

    def test_the_pytorch_state_hooks_time_is_added_to_its_ranks_and_shown_as_a_phase(self):
        # Rank 1's hook: 30 steady calls of 20 us over its 30 steps, which hold the shim's state
        # call (its phase: 30 x 15 us): 5 us a step more; the slow first call stays apart. Rank
        # 0 has no hook line: its total stays its own.
        output = self.OUTPUT.replace("call end 9000 x 100 ns;",
                                     "call end 9000 x 100 ns, state 30 x 15000 ns;") + (
            "lockstep[1]: python state hook self time: 30 x 20000 ns (+1 slow, 80.0 ms)\n")
        ranks = overhead.self_time_ranks(output)
        self.assertEqual(ranks["0"][0], 310.0)
        self.assertAlmostEqual(ranks["1"][0], 455.0)
        self.assertAlmostEqual(overhead.self_time_us(output), 455.0)
        hook = overhead.self_time_phases(output)["python state hook"]
        self.assertEqual((hook["calls_per_step"], hook["ns_per_call"]), (1, 5000))
        self.assertAlmostEqual(hook["us_per_step"], 5.0)

    def test_a_run_without_the_lines_has_no_phases(self):
        self.assertEqual(overhead.self_time_phases("no debug here"), {})
        self.assertIsNone(overhead.self_time_us(""))

    def test_detail_asks_the_shim_for_its_nested_phases(self):
        args = overhead.parse_args(["--lockstep", "x", "--self-time", "--self-time-detail"])
        _, env, _, _ = overhead.mode_command(args, "broad", "t", tempfile.mkdtemp(), debug=True)
        self.assertEqual(env["LOCKSTEP_DEBUG"], "2")
        args = overhead.parse_args(["--lockstep", "x", "--self-time"])
        _, env, _, _ = overhead.mode_command(args, "broad", "t", tempfile.mkdtemp(), debug=True)
        self.assertEqual(env["LOCKSTEP_DEBUG"], "1")



class UnseenJobInOverheadTest(unittest.TestCase):
    """overhead.py --job unseen: bench/overhead/train_unseen.py with its own size, one process,
    against the stand-ins (fake/python runs any gated job)."""

    def test_size_presets_are_refused_for_the_unseen_job(self):
        proc = subprocess.run([sys.executable, OVERHEAD, "--lockstep", "x", "--job", "unseen",
                               "--size", "gpu-bound"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stdout)
        self.assertIn("--size is for the GPT jobs: --job unseen has its own size", proc.stdout)

    def test_the_unseen_job_runs_its_script_with_its_own_size_and_full_target(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        out, log = os.path.join(tmp, "o.json"), os.path.join(tmp, "log")
        proc = subprocess.run(
            [sys.executable, OVERHEAD, "--lockstep", os.path.join(FAKE, "lockstep"),
             "--python", os.path.join(FAKE, "python"), "--job", "unseen", "--levels",
             "broad,full", "--sets", "1", "--chunks", "4", "--chunk-steps", "2", "--skip", "1",
             "--cpus", "all", "--json", out, "--log", log],
            env=dict(os.environ, FAKE_FACTORS="full=1.6"), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:])
        with open(out) as f:
            doc = json.load(f)
        rows = {row["mode"]: row for row in doc["rows"]}
        self.assertEqual((doc["job"], doc["size"]), ("unseen", None))
        self.assertEqual(rows["full"]["target_ratio"], 1.5)
        self.assertEqual(rows["full"]["verdict"], "FAIL")  # x1.6 in every turn
        self.assertEqual(rows["broad"]["verdict"], "PASS")
        self.assertIn("overhead: job unseen, its own size", proc.stdout)
        with open(log) as f:
            commands = [line for line in f if line.startswith("=== overhead ")]
        self.assertEqual(len(commands), 3, commands)
        for line in commands:
            self.assertIn(f"{TRAIN} --steps 9 --out ", line)  # 1 + 4 x 2 steps
            self.assertIn("--gate", line)
            self.assertNotIn("--dim", line)  # no GPT size preset
            self.assertNotIn("torch.distributed.run", line)


class TrainUnseenArgumentsTest(unittest.TestCase):
    """bench/overhead/train_unseen.py before torch: bad arguments, missing torch or CUDA give one
    line and exit 2."""

    def run_job(self, *argv, torch_stub=None):
        """Runs the job; torch_stub: the text of a stand-in torch module (None: no torch at all,
        a module whose import fails, whatever this machine has)."""
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        with open(os.path.join(tmp, "torch.py"), "w") as f:
            f.write(torch_stub or "raise ImportError('no torch (stand-in)')\n")
        env = dict(os.environ, PYTHONPATH=tmp, PYTHONDONTWRITEBYTECODE="1")
        return subprocess.run([sys.executable, TRAIN, *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60, env=env)

    def test_without_torch_it_says_so_in_one_line(self):
        proc = self.run_job("--steps", "2")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr, "train_unseen.py: PyTorch is not installed\n")
        self.assertEqual(proc.stdout, "")

    def test_without_cuda_it_says_so_in_one_line(self):
        stub = ("__version__ = '2.11.0'\n"
                "class nn:\n    RMSNorm = object\n"
                "class optim:\n    Adafactor = object\n"
                "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n")
        proc = self.run_job("--steps", "2", torch_stub=stub)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr, "train_unseen.py: no CUDA device visible\n")

    def test_a_torch_too_old_for_the_model_is_named(self):
        stub = "__version__ = '2.1.0'\nclass nn:\n    pass\n"
        proc = self.run_job(torch_stub=stub)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr, "train_unseen.py: PyTorch 2.1.0 has no torch.nn.RMSNorm "
                                      "(needs 2.5 or later)\n")

    def test_shapes_the_model_cannot_take_are_refused_before_torch(self):
        for argv, problem in ((["--heads", "5"], "--dim 768 is not a multiple of --heads 5"),
                              (["--kv-heads", "5"], "--heads 12 is not a multiple of --kv-heads 5"),
                              (["--dim", "36"], "head size 3 is odd"),
                              (["--steps", "0"], "--steps must be at least 1"),
                              (["--kv-heads", "0"], "--kv-heads must be at least 1")):
            proc = self.run_job(*argv)
            self.assertEqual(proc.returncode, 2, argv)
            self.assertIn(f"train_unseen.py: error: {problem}", proc.stderr)

    def test_the_defaults_are_the_benchmark_size(self):
        args = load_train_unseen().parse_args([])
        self.assertEqual((args.dim, args.layers, args.heads, args.kv_heads, args.hidden,
                          args.vocab, args.batch, args.seq),
                         (768, 12, 12, 4, 2048, 32000, 8, 1024))
        self.assertEqual((args.optimizer, args.foreach, args.device), ("auto", True, "cuda"))

    def test_overheads_arguments_are_taken(self):
        args = load_train_unseen().parse_args(["--steps", "45", "--out", "/tmp/x.json",
                                               "--gate", "/tmp/g", "--seed", "7"])
        self.assertEqual((args.steps, args.out, args.gate, args.seed),
                         (45, "/tmp/x.json", "/tmp/g", 7))

    def test_the_schedule_warms_up_then_falls_as_a_cosine_to_a_tenth(self):
        f = load_train_unseen().lr_factor
        self.assertEqual([f(s, 45, 5) for s in range(5)], [0.2, 0.4, 0.6, 0.8, 1.0])
        self.assertAlmostEqual(f(5, 45, 5), 1.0)
        self.assertAlmostEqual(f(25, 45, 5), 0.55)  # halfway down
        self.assertAlmostEqual(f(45, 45, 5), 0.1)
        values = [f(s, 45, 5) for s in range(5, 46)]
        self.assertTrue(all(a >= b for a, b in zip(values, values[1:])))


class TrainUnseenSmokeTest(unittest.TestCase):
    """A tiny CPU run of the real model (forward, backward, clipping, the optimizer, the
    schedule): where a PyTorch 2.5+ is importable (the GPU machine's python has one)."""

    TINY = ["--device", "cpu", "--steps", "2", "--batch", "2", "--seq", "16", "--dim", "32",
            "--layers", "2", "--heads", "4", "--kv-heads", "2", "--hidden", "64", "--vocab",
            "64", "--markers", "none"]

    @classmethod
    def setUpClass(cls):
        why = real_torch_for_smoke()
        if why:
            raise unittest.SkipTest(why)

    def run_tiny(self, *extra):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        out = os.path.join(tmp, "out.json")
        proc = subprocess.run([sys.executable, TRAIN, *self.TINY, "--out", out, *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        with open(out) as f:
            return proc, json.load(f)

    def test_two_steps_train_and_repeat_bit_for_bit(self):
        proc, doc = self.run_tiny()
        self.assertEqual(len(doc["step_times_s"]), 2)
        self.assertTrue(all(math.isfinite(v) for v in doc["losses"]), doc["losses"])
        self.assertEqual(proc.stdout.count("\nstep ") + proc.stdout.startswith("step "), 2)
        self.assertIn("Adafactor", doc["optimizer"])
        _, again = self.run_tiny()
        self.assertEqual(again["loss_hex"], doc["loss_hex"])

    def test_the_fallbacks_train_too(self):
        # SGD with Nesterov momentum (a torch without Adafactor), the per-tensor Adafactor, and
        # key/value heads repeated before a plain sdpa call.
        for extra in (["--optimizer", "sgd"], ["--no-foreach"], ["--kv-repeat"]):
            _, doc = self.run_tiny(*extra)
            self.assertTrue(all(math.isfinite(v) for v in doc["losses"]), (extra, doc))
        _, sgd = self.run_tiny("--optimizer", "sgd")
        self.assertEqual(sgd["optimizer"], "SGD (Nesterov)")


if __name__ == "__main__":
    unittest.main()
