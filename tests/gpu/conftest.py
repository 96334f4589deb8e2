"""pytest hooks and fixtures of lockstep's GPU suite (the machinery is in gpu_suite.py).

Every test records rows (the `row` fixture); a FAIL row fails its test, a test that records only
SKIP rows is skipped, an exception is a FAIL row. Tests marked `gpu` skip without a GPU and
`two_gpus` ones with fewer than two, each as a SKIP row named by its @pytest.mark.row. At the
end the table is printed (terminal summary) and written to $OUT with the results JSON.
"""

import os
import time

import pytest

import gpu_suite

SUITE = None


def pytest_configure(config):
    for line in ("gpu: needs a GPU (skips without one)",
                 "two_gpus: needs two GPUs (skips with fewer)",
                 "row(name): the check's name in the table ('{param}' from its parameters)"):
        config.addinivalue_line("markers", line)
    # Environment of every job, as run.sh set it: NVLink multicast off (the device machines
    # cannot use it), deterministic cuBLAS, and steps counted only at lockstep_step() so that
    # trace step N is the example's step N.
    os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
                      NVSHMEM_DISABLE_NVLS="1", CUBLAS_WORKSPACE_CONFIG=":4096:8")
    os.environ.setdefault("LOCKSTEP_STEP_ON", "api")


def suite():
    global SUITE
    if SUITE is None:
        SUITE = gpu_suite.Suite()
        if SUITE.gpus() > 0:
            cfg = SUITE.config
            SUITE.find_missing_libs([cfg.lockstep, os.path.join(cfg.build, "interpose",
                                                                "liblockstep.so"),
                                     cfg.cuda_example])
    return SUITE


def pytest_collection_modifyitems(config, items):
    # -k selects by the row's name too: -k tpdp_det_broad, -k overhead.
    for item in items:
        item.extra_keyword_matches.add(row_name(item).replace(" ", "_"))


def pytest_collection_finish(session):
    if session.items:
        s = suite()
        s.groups.update(gpu_suite.group_of(item.location[0]) for item in session.items)


def row_name(item):
    marker = item.get_closest_marker("row")
    if marker is None:
        return item.name
    params = getattr(getattr(item, "callspec", None), "params", {})
    return marker.args[0].format(**params)


class Rows:
    """The `row` fixture: row(result, figure) records the test's own row; row.add(check, ...)
    any other; row.skip(reason) records a SKIP row and skips the test."""

    def __init__(self, item):
        self.item = item
        self.name = row_name(item)
        self.mine = []
        item._lockstep_rows = self.mine
        self.last = time.monotonic()  # the test's start, then its last row's time

    def add(self, check, result, figure, numbers=None):
        item = self.item
        # What the row took (since the test began or its previous row): the results JSON's
        # per-row seconds, from which a session's device time can be planned.
        now = time.monotonic()
        seconds, self.last = now - self.last, now
        r = suite().table.add(check, result, figure, numbers,
                              group=gpu_suite.group_of(item.location[0]), test=item.nodeid,
                              seconds=seconds)
        self.mine.append(r)
        return r

    def __call__(self, result, figure, numbers=None):
        return self.add(self.name, result, figure, numbers)

    def skip(self, reason, check=None):
        self.add(check or self.name, "SKIP", reason)
        pytest.skip(reason)

    def need(self, seconds):
        """Skips the test (a SKIP row) when the time budget has less left than it needs: at
        most `seconds`, less where earlier runs timed it (Suite.needs)."""
        if not suite().fits(suite().needs(self.item.nodeid, seconds)):
            self.skip("time budget")


@pytest.fixture(scope="session")
def gs():
    """The session's gpu_suite.Suite: config, runs, budget."""
    return suite()


@pytest.fixture
def traced_run(gs):
    """traced_run(name, level, limit, cmd): `lockstep run` of cmd into WORK/name (a Run)."""
    return gs.traced


@pytest.fixture
def run_pair(gs):
    """run_pair(prefix, level, limit, cmd): the job traced twice (prefix-1, prefix-2)."""
    return gs.pair


@pytest.fixture
def diff(gs):
    """diff(name, a, b): `lockstep diff --json` of two traced runs; its report is the Run's .out
    and its exit code the Run's rc."""
    return gs.diff


@pytest.fixture
def row(request):
    return Rows(request.node)


@pytest.fixture(autouse=True)
def _gpus_needed(request):
    n = suite().gpus()
    if request.node.get_closest_marker("gpu") and n < 1:
        pytest.skip("no GPU (nvidia-smi lists none)")
    if request.node.get_closest_marker("two_gpus") and n < 2:
        pytest.skip(gpu_suite.fewer_gpus(n))


def _reason(rep):
    if isinstance(rep.longrepr, tuple) and len(rep.longrepr) == 3:
        return rep.longrepr[2].replace("Skipped: ", "", 1)
    return str(rep.longrepr).splitlines()[-1] if rep.longrepr else ""


def _error(call):
    exc = call.excinfo
    return f"{exc.typename}: {str(exc.value).strip()[:100]}" if exc else "?"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    rows = getattr(item, "_lockstep_rows", None)
    if rows is None:
        rows = item._lockstep_rows = []
    group = gpu_suite.group_of(item.location[0])

    def add(result, figure):
        rows.append(suite().table.add(row_name(item), result, figure, group=group,
                                      test=item.nodeid))

    if rep.when == "setup":
        if rep.skipped:
            add("SKIP", _reason(rep))
        elif rep.failed:
            add("FAIL", f"setup error: {_error(call)}")
        return
    if rep.when != "call":
        return
    fails = [r for r in rows if r["result"] == "FAIL"]
    if rep.skipped:
        if not rows:
            add("SKIP", _reason(rep))
    elif rep.failed:
        if not fails:
            add("FAIL", f"error: {_error(call)}")
    elif fails:
        rep.outcome = "failed"
        rep.longrepr = "\n".join(f"{r['check']}: FAIL: {r['figure']}" for r in fails)
    elif not rows:
        add("FAIL", "the test recorded no row")
        rep.outcome = "failed"
        rep.longrepr = "the test recorded no row"
    elif all(r["result"] == "SKIP" for r in rows):
        rep.outcome = "skipped"
        rep.longrepr = (item.location[0], item.location[1] or 0, "Skipped: " + rows[0]["figure"])


def pytest_sessionfinish(session, exitstatus):
    if SUITE is not None:
        session.config._lockstep_table = SUITE.finish()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    text = getattr(config, "_lockstep_table", None)
    if text:
        terminalreporter.write(text)
