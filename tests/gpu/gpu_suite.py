"""The machinery of lockstep's GPU suite (tests/gpu/test_*.py): configuration from the
environment, the table of rows, the time budget, and the runs (untraced, traced, diffs, the
e2e helper scripts). conftest.py turns it into fixtures and hooks; the test files hold the
checks and their thresholds.

A row is one line of the table: check, result (PASS, FAIL, KNOWN, SKIP), one key figure and,
where there are any, its numbers (a dict, into the results JSON). KNOWN: a cost over its goal
that README's "Known limits" names and explains, still under the limit that fails the row.

To add a check: a test function in the test file of its group, marked
@pytest.mark.row("check name {param}") (the name its SKIP row gets when it does not run), that
calls row(result, figure) once (row.add(check, ...) for further rows). An exception in a test is
a FAIL row; a FAIL row fails the test.
"""

import datetime
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "overhead"))
import run_facts  # noqa: E402  (commit, GPU, driver, date: one home for every results JSON)
from paired import paired_ratio  # noqa: E402  (turns paired round by round)
E2E = os.path.join(ROOT, "tests", "gpu", "e2e")
RESULTS = ("PASS", "FAIL", "KNOWN", "SKIP")


def suite_order(root=ROOT):
    """The group letters (tests/gpu/test_<letter>_*.py) in the order they run: run.sh's ORDER,
    the one list of them (perf-table.py and run_parallel.sh read it here too)."""
    with open(os.path.join(root, "tests", "gpu", "run.sh")) as f:
        m = re.search(r"^ORDER=([a-z]+)", f.read(), re.M)
    if not m:
        raise RuntimeError("tests/gpu/run.sh: no ORDER= line")
    return m.group(1)


ORDER = suite_order()


# A `two_gpus` check on a machine with fewer: its SKIP row's figure (conftest.py), which
# plan.py reads as "needs more GPUs", not as a check never timed.
def fewer_gpus(n):
    return f"{n} GPU visible"


FEWER_GPUS = re.compile(r"^\d+ GPU visible$")


def group_of(path):
    """The group letter of a test file (test_d_cuda_example.py -> d), or "" for none."""
    m = re.match(r"test_([a-z])_", os.path.basename(str(path)))
    return m.group(1) if m else ""


class Config:
    """Everything the environment sets (see run.sh's header for the list)."""

    def __init__(self, env=None):
        env = os.environ if env is None else env
        build = env.get("BUILD", "build")
        self.build = build if os.path.isabs(build) else os.path.join(ROOT, build)
        self.out = env.get("OUT", "/tmp/lockstep-gpu")
        self.budget_s = float(env.get("BUDGET_S", "540"))
        # Earlier runs' results JSONs: how long each check took (Suite.needs).
        self.results = env.get("RESULTS", os.path.join(ROOT, "results"))
        self.py = env.get("PYTHON", "python3")
        self.keep = env.get("KEEP", "0") == "1"
        self.save = env.get("SAVE", "")
        self.require_gpu = env.get("REQUIRE_GPU", "0") == "1"
        self.lockstep = os.path.join(self.build, "tools", "lockstep")
        self.cuda_example = os.path.join(self.build, "examples", "cuda", "lockstep_example_cuda")
        self.env = env

    def get(self, name, default):
        return self.env.get(name, default)

    def gtests(self):
        """The GPU gtest binaries under BUILD/tests/gpu, sorted."""
        found = []
        top = os.path.join(self.build, "tests", "gpu")
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if d != "CMakeFiles"]
            for name in filenames:
                path = os.path.join(dirpath, name)
                if ".so" not in name and os.access(path, os.X_OK) and os.path.isfile(path):
                    found.append(path)
        return sorted(found)


def gpu_count(env=None):
    """GPUs this run may use: CUDA_VISIBLE_DEVICES when set (a lane of run_parallel.sh), else
    every GPU nvidia-smi lists."""
    env = os.environ if env is None else env
    if "CUDA_VISIBLE_DEVICES" in env:
        return len([i for i in env["CUDA_VISIBLE_DEVICES"].split(",") if i.strip()])
    try:
        out = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU"))


class Table:
    """The rows in the order they were recorded."""

    def __init__(self):
        self.rows = []

    def add(self, check, result, figure, numbers=None, group="", test="", seconds=None):
        assert result in RESULTS, result
        row = {"check": check, "result": result, "figure": str(figure), "group": group,
               "test": test}
        if seconds is not None:
            row["seconds"] = round(seconds, 1)
        if numbers:
            row["numbers"] = numbers
        self.rows.append(row)
        return row

    def failed(self):
        return any(r["result"] == "FAIL" for r in self.rows)

    def text(self, title):
        lines = ["", title, f"{'check':<24} {'result':<6} key figure",
                 f"{'-' * 24} {'-' * 6} ----------"]
        lines += [f"{r['check']:<24} {r['result']:<6} {r['figure']}" for r in self.rows]
        return "\n".join(lines) + "\n"


class Suite:
    """One session: config, table, budget, scratch folder, log."""

    def __init__(self, config=None):
        self.config = config or Config()
        self.table = Table()
        self.start = time.monotonic()
        self.started_at = datetime.datetime.now(datetime.timezone.utc)
        os.makedirs(self.config.out, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="lockstep-gpu-work.",
                                     dir=os.environ.get("TMPDIR", "/tmp"))
        self.log_path = os.path.join(self.config.out, "run.log")
        # Appended to (O_APPEND), as overhead.py --log appends to the same file meanwhile.
        open(self.log_path, "w").close()
        self.log = open(self.log_path, "a")
        self.extra_libs = []
        self._torch = None
        self._jax = None
        self._gpus = None
        self._took = None  # {test: the longest it took in RESULTS}, read at the first needs()
        self.groups = set()
        self.say(f"lockstep GPU run: {self.started_at:%Y-%m-%d %H:%M:%S} UTC, root {ROOT}, "
                 f"build {self.config.build}, work {self.work}")

    # ---- time and log ----
    def elapsed(self):
        return time.monotonic() - self.start

    def remaining(self):
        return self.config.budget_s - self.elapsed()

    def fits(self, seconds):
        return self.remaining() >= seconds

    # A check asks for the seconds it may take at most (Rows.need), written once for the
    # slowest machine it met; where results JSONs timed it (plan.py reads them), it needs
    # NEED_MARGIN times its longest run there plus NEED_SLACK_S when that is less, so a run with
    # a tight BUDGET_S skips fewer checks that would fit. The longest, not the newest, and the
    # margin: a check the budget cuts off is a FAIL row ("killed ... not a result"), and a run
    # that failed early or met a fast instance would promise too little.
    NEED_MARGIN, NEED_SLACK_S = 1.5, 15.0

    def needs(self, test, asked):
        """The seconds check `test` (a pytest node id) needs: asked, or less where it was timed."""
        if self._took is None:
            self._took = {}
            try:
                import plan
                times, _, _ = plan.read_results(
                    glob.glob(os.path.join(self.config.results, "*.json")), longest=True)
            except SystemExit:  # a file that is not JSON: plan.py said so on stderr
                times = {}
            for by_check in times.values():
                self._took.update({check: seconds for check, (seconds, _) in by_check.items()})
        took = self._took.get(test)
        if took is None:
            return asked
        return min(asked, self.NEED_MARGIN * took + self.NEED_SLACK_S)

    def say(self, text):
        print(text, file=self.log, flush=True)

    # ---- what this machine has ----
    def gpus(self):
        if self._gpus is None:
            self._gpus = gpu_count()
        return self._gpus

    def have_torch(self):
        """Torch with CUDA in PYTHON (asked once: importing torch takes seconds)."""
        if self._torch is None:
            try:
                self._torch = subprocess.run(
                    [self.config.py, "-c",
                     "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    timeout=120).returncode == 0
            except (OSError, subprocess.SubprocessError):
                self._torch = False
        return self._torch

    def have_jax(self):
        """JAX with a GPU backend in PYTHON (asked once)."""
        if self._jax is None:
            try:
                self._jax = subprocess.run(
                    [self.config.py, "-c",
                     "import jax, sys; sys.exit(0 if any(d.platform == 'gpu' "
                     "for d in jax.devices()) else 1)"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    timeout=180).returncode == 0
            except (OSError, subprocess.SubprocessError):
                self._jax = False
        return self._jax

    def have_lockstep(self):
        return os.access(self.config.lockstep, os.X_OK)

    def find_missing_libs(self, binaries):
        """Libraries a binary cannot find (the GPU machine may keep NCCL or cuBLAS only in pip
        wheels): their folders go in front of LD_LIBRARY_PATH for the traced and untraced runs."""
        dirs = ["/usr/local/cuda/lib64", "/usr/local/cuda/lib"]
        dirs += [os.path.join("/usr/local/cuda/targets", t, "lib")
                 for t in (os.listdir("/usr/local/cuda/targets")
                           if os.path.isdir("/usr/local/cuda/targets") else [])]
        site = None
        for binary in binaries:
            if not os.path.exists(binary):
                continue
            try:
                ldd = subprocess.run(["ldd", binary], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, timeout=60).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            for lib in re.findall(r"^\s*(\S+) => not found", ldd, re.M):
                if site is None:
                    try:
                        site = subprocess.run(
                            [self.config.py, "-c",
                             "import site; print(' '.join(site.getsitepackages()))"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            timeout=60).stdout.split()
                    except (OSError, subprocess.SubprocessError):
                        site = []
                found = next((p for d in dirs + site for p in _find(d, lib)), None)
                if found:
                    self.extra_libs.insert(0, os.path.dirname(found))
                    self.say(f"note: {binary}: {lib} from {found}")
                else:
                    self.say(f"note: {binary}: {lib} not found anywhere")

    # ---- runs ----
    def path(self, name):
        return os.path.join(self.work, name)

    def run(self, name, limit, cmd, env=None, libs=False):
        """Runs cmd: stdout to WORK/NAME.out, stderr to WORK/NAME.err, their tails into the log.
        Never far past the budget (the device machine stops commands at 10 minutes). Returns a
        Run; its rc is 124 on timeout, and its last_err() then says which limit stopped it."""
        asked = limit
        limit = max(10, min(limit, self.remaining() + 30))
        full_env = dict(os.environ, **(env or {}))
        if libs and self.extra_libs:
            parts = self.extra_libs + full_env.get("LD_LIBRARY_PATH", "").split(":")
            full_env["LD_LIBRARY_PATH"] = ":".join(p for p in parts if p)
        out, err = self.path(name + ".out"), self.path(name + ".err")
        t0 = time.monotonic()
        with open(out, "w") as fo, open(err, "w") as fe:
            try:
                proc = subprocess.Popen([str(c) for c in cmd], stdout=fo, stderr=fe,
                                        env=full_env, start_new_session=True)
            except OSError as e:
                fe.write(f"{cmd[0]}: {e}\n")
                proc = None
            rc = 127 if proc is None else _wait(proc, limit)
        run = Run(name, rc, out, err, self.path(name))
        if proc is not None and rc == 124 and time.monotonic() - t0 >= limit:
            run.killed = (f"killed at {limit:.0f} s by the suite's time budget (BUDGET_S="
                          f"{self.config.budget_s:.0f}), not a result" if limit < asked else
                          f"killed at its own limit of {limit:.0f} s")
        self.log.write(f"=== {name}: rc={rc} {time.monotonic() - t0:.0f}s: "
                       f"{' '.join(map(str, cmd))}\n")
        self.log.write(_tail(out, 60) + "--- stderr\n" + _tail(err, 40))
        self.log.flush()
        return run

    def untraced(self, name, limit, cmd):
        return self.run(name, limit, cmd, libs=True)

    def traced(self, name, level, limit, cmd, run_args=(), env=None):
        """`lockstep run -o WORK/NAME --level LEVEL [run_args] -- cmd`."""
        return self.run(name, limit, [self.config.lockstep, "run", "-o", self.path(name),
                                      "--level", level, *run_args, "--", *cmd],
                        env=env, libs=True)

    def pair(self, prefix, level, limit, cmd, run_args=()):
        """The same job traced twice: PREFIX-1 and PREFIX-2."""
        return tuple(self.traced(f"{prefix}-{i}", level, limit, cmd, run_args) for i in (1, 2))

    def diff(self, name, a, b, limit=120):
        """`lockstep diff --json` of two traced runs; the report is the Run's .out."""
        return self.run(name, limit, [self.config.lockstep, "diff", self.path(a), self.path(b),
                                      "--json"])

    def helper(self, script, *args):
        """(exit code, last line) of a tests/gpu/e2e helper (check_diff.py, losses.py, ...)."""
        proc = subprocess.run([sys.executable, os.path.join(E2E, script), *map(str, args)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=600)
        self.log.write(f"--- {script} {' '.join(map(str, args))}: rc={proc.returncode}\n"
                       f"{proc.stdout[-4000:]}\n")
        lines = proc.stdout.strip().splitlines()
        return proc.returncode, lines[-1] if lines else ""

    def check_diff(self, report, *args):
        return self.helper("check_diff.py", report, *args)[1]

    def same_losses(self, a, b, *args):
        return self.helper("losses.py", a, b, *args)[1]

    # ---- the end ----
    def finish(self, results_name=None):
        """table.txt, the results JSON, logs.tar.gz (and SAVE's traces) under OUT; returns the
        table's text."""
        cfg = self.config
        now = datetime.datetime.now(datetime.timezone.utc)
        groups = "".join(g for g in ORDER if g in self.groups) or "none"
        text = self.table.text(f"lockstep GPU checks ({groups}), {now:%Y-%m-%d %H:%M} UTC, "
                               f"{self.elapsed():.0f} s")
        with open(os.path.join(cfg.out, "table.txt"), "w") as f:
            f.write(text)
        self.log.write(text)
        facts = run_facts.facts(self.started_at)
        doc = {"schema": "lockstep-gpu-results", "version": 1, **facts,
               "seconds": round(self.elapsed(), 1), "groups": groups, "gpus": self.gpus(),
               "host": os.uname().nodename, "torch": self.torch_version(),
               "source": "tests/gpu (pytest)", "rows": self.table.rows}
        name = results_name or results_file_name(self.started_at, facts["commit"], groups)
        with open(os.path.join(cfg.out, name), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        # Every step's stdout/stderr and the benchmarks' own JSON and tables (small files only)
        # in one archive next to the table: the device machine brings back at most 8 files.
        with tarfile.open(os.path.join(cfg.out, "logs.tar.gz"), "w:gz") as tar:
            for entry in sorted(os.listdir(self.work)):
                p = self.path(entry)
                if (entry.endswith((".out", ".err", ".json", ".md")) and os.path.isfile(p)
                        and os.path.getsize(p) < 2 << 20):
                    tar.add(p, arcname=entry)
        if cfg.save:
            with tarfile.open(os.path.join(cfg.out, "traces.tar.gz"), "w:gz") as tar:
                for pattern in cfg.save.split():
                    for p in sorted(glob.glob(self.path(pattern))):
                        tar.add(p, arcname=os.path.basename(p))
        self.log.close()
        if cfg.keep:
            print(f"traces kept in {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)
        return text

    def torch_version(self):
        if not self._torch:
            return None
        try:
            return subprocess.run([self.config.py, "-c", "import torch; print(torch.__version__)"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                  timeout=120).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            return None


def results_file_name(when, commit, groups):
    """results/<date>T<time>Z-<commit>-<groups>.json: sorts by date."""
    return f"{when:%Y-%m-%dT%H%M}Z-{commit.replace('+', '-')}-{groups}.json"


class Run:
    def __init__(self, name, rc, out, err, trace):
        self.name, self.rc, self.out, self.err, self.trace = name, rc, out, err, trace
        self.killed = ""  # why the suite stopped it (Suite.run), "" when it ended by itself

    def text(self):
        return _read(self.out)

    def err_text(self):
        return _read(self.err)

    def last_err(self, width=70):
        """Stderr's last line, or why the suite stopped the run (a row's "rc 124: ..." would
        otherwise read as the job's own failure)."""
        if self.killed:
            return self.killed
        lines = self.err_text().strip().splitlines()
        return lines[-1][:width] if lines else ""

    def first(self, pattern, width=80, stderr=False):
        """The first line matching pattern, cut to width, or ""."""
        for line in (self.err_text() if stderr else self.text()).splitlines():
            if re.search(pattern, line):
                return line[:width]
        return ""


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _tail(path, n):
    lines = _read(path).splitlines()[-n:]
    return "".join(line + "\n" for line in lines)


def _wait(proc, limit):
    try:
        return proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        pass
    # As `timeout -k 10`: TERM to the whole process group (torchrun's workers too), then KILL.
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            pass
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    return 124


def _find(top, name):
    for dirpath, _, filenames in os.walk(top):
        if name in filenames:
            yield os.path.join(dirpath, name)


# ---- overhead.py's JSON (bench/overhead/overhead.py --json): figures, never its printed text ----

def load_json(path):
    """A bench's --json document, or None when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def load_overhead(path):
    """The rows of an overhead.py JSON by mode, or None when it is missing or unreadable."""
    try:
        return {row["mode"]: row for row in load_json(path)["rows"]}
    except (KeyError, TypeError):
        return None


def fmt(value, spec, none="-"):
    return format(value, spec) if value is not None else none


def overhead_numbers(row):
    """The numbers of one mode's row that go into the results JSON."""
    keys = ("median_step_ms", "ratio", "ratio_interval", "verdict", "target_ratio",
            "within_target", "pooled_ratio",
            "trace_bytes_per_step_per_rank", "shim_self_us_per_step", "shim_self_share",
            "shim_self_share_interval", "shim_self_verdict", "shim_self_within_target",
            "shim_self_phases", "set_ratios", "shim_self_us_runs", "shim_self_step_ms_runs",
            "shim_self_own_share", "shim_self_own_share_interval", "shim_self_own_verdict",
            "chunk_ratio_quartiles")
    return {k: row.get(k) for k in keys if row.get(k) is not None}


def overhead_rest(row):
    """'36.036 ms/step (60 chunks, ...), 5,178 B/step/rank': the step and the trace size."""
    return (f"{fmt(row.get('median_step_ms'), '.3f')} ms/step ({row.get('spread') or '-'}), "
            f"{fmt(row.get('trace_bytes_per_step_per_rank'), ',.0f')} B/step/rank")


def bench_json(gs, name, limit, script, prefix=(), env=None):
    """Runs bench/overhead/SCRIPT with --json into this run's folder (behind `prefix`, e.g. a
    `lockstep run`): (Run, the JSON or None). A stale file is removed first: not this run's."""
    path = gs.path(name + ".json")
    if os.path.exists(path):
        os.unlink(path)
    run = gs.run(name, limit, [*prefix, gs.config.py,
                               os.path.join(ROOT, "bench", "overhead", script), "--json", path],
                 env=env)
    return run, load_json(path)


def traced_bench(gs, row, name, limit, level, script, env=None):
    """Runs bench/overhead/SCRIPT under `lockstep run --level LEVEL` with --json; its figures
    (the JSON), or None after a FAIL row when it failed or did not run traced."""
    run, found = bench_json(gs, name, limit, script, env=env,
                            prefix=(gs.config.lockstep, "run", "-o", gs.path("trace-" + name),
                                    "--level", level, "--"))
    if run.rc != 0 or found is None or not found.get("traced"):
        row("FAIL", f"rc {run.rc}: {run.last_err() if found is None else 'not traced'}")
        return None
    return found


def paired_modes(mine, theirs, target, limit):
    """Two modes of one overhead.py run against each other, turn by turn (each round's chunk
    medians paired: a slow phase of the host falls on both): {"ratio", "interval", "turns",
    "result"}, result PASS when the interval's top is at most `target`, FAIL when its bottom is
    over `limit`, else KNOWN; None without paired turns. A ratio of the two modes' medians is
    not a verdict: on one H100 it read x0.980 where the two sets of turns said x0.973 and x1.057."""
    pair = paired_ratio(mine.get("chunk_medians_ms") or [], theirs.get("chunk_medians_ms") or [])
    if pair is None:
        return None
    low, high = 1 + pair["interval"][0], 1 + pair["interval"][1]
    result = "PASS" if high <= target else "FAIL" if low > limit else "KNOWN"
    return {"ratio": 1 + pair["median"], "interval": [low, high], "turns": pair["runs"],
            "result": result}


# The shim's share of a step over which a self-judged row fails: the 7% that Megatron's own
# tracing work treats as blocking (issue 7); between the goal (overhead.py's target) and this,
# KNOWN. Its one home.
SELF_LIMIT_PCT = 7.0


def broad_overhead(gs, row, job, nproc, judge, sets=2, chunks=None):
    """bench/overhead/overhead.py for a multi-process job (ddp, tpdp) untraced and at broad,
    taking turns, plus one LOCKSTEP_DEBUG run for the shim's own time per step. judge "ratio":
    the row judges the turns' ratio against its target (overhead.py's verdict from the ratio's
    interval: PASS, FAIL, or KNOWN within noise of the target), the self time shown; judge
    "self" (as the launch-bound GPT job): the row judges the shim's time per step as a share of the
    untraced step, the ratio shown (its sets of processes differ by several percent, more than
    the target): PASS within the goal, KNOWN up to SELF_LIMIT_PCT, FAIL above. sets and chunks:
    overhead.py's (chunks default DDP_OVERHEAD_CHUNKS, 30)."""
    row.need(90)
    name = job if nproc > 1 else f"{job}-1rank"
    path = gs.path(f"overhead-{name}.json")
    if os.path.exists(path):
        os.unlink(path)
    run = gs.run(f"{name}-overhead", 300, [
        gs.config.py, os.path.join(ROOT, "bench", "overhead", "overhead.py"), "--lockstep",
        gs.config.lockstep, "--python", gs.config.py, "--job", job, "--nproc", nproc, "--levels",
        "broad", "--sets", sets, "--chunks", chunks or gs.config.get("DDP_OVERHEAD_CHUNKS", "30"),
        "--chunk-steps", 5, "--skip", 5, "--self-time", "--self-time-runs", 1, "--json", path,
        "--log", gs.log_path])
    rows = load_overhead(path)
    r = (rows or {}).get("broad")
    if run.rc != 0 or r is None or r.get("ratio") is None:
        row("FAIL", f"rc {run.rc}: {run.last_err()}")
        return
    numbers = overhead_numbers(r)
    ratio, rest = f"x{r['ratio']:.3f}", overhead_rest(r)
    us, share = r.get("shim_self_us_per_step"), r.get("shim_self_share")
    goal = 100 * (r["target_ratio"] - 1)
    if judge == "self":
        if us is None or share is None:
            row("FAIL", f"no shim self time printed; {ratio}, {rest}", numbers)
            return
        # overhead.py's verdict from the interval of the runs' shares (one run: its share).
        judged = r.get("shim_self_verdict")
        result, verdict = "PASS", f"goal {goal:.1f}%"
        if judged == "KNOWN":
            result, verdict = "KNOWN", f"goal {goal:.1f}%, within noise of it"
        elif judged != "PASS":
            if 100 * share <= SELF_LIMIT_PCT:
                result = "KNOWN"
                verdict = (f"over the {goal:.1f}% goal: README, Known limits; FAIL above "
                           f"{SELF_LIMIT_PCT:.1f}%")
            else:
                result, verdict = "FAIL", f"over the {SELF_LIMIT_PCT:.1f}% limit"
        row(result, f"shim {us:.1f} us/step ({100 * share:.2f}% of the untraced step, "
                    f"{verdict}); {ratio}, {rest} (ratio not judged)", numbers)
    else:
        shim = f"; shim {us:.1f} us/step ({100 * share:.2f}%, not judged)" if share is not None \
            else ""
        # overhead.py's verdict from the ratio's interval: KNOWN within noise of the target.
        result = r.get("verdict") or "FAIL"
        noise = ", within noise of it" if result == "KNOWN" else ""
        row(result, f"{ratio} (target x{r['target_ratio']:.3f}{noise}), {rest}{shim}", numbers)
