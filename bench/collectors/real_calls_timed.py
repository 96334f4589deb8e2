#!/usr/bin/env python3
"""LOCKSTEP_DEBUG times the job's own kernel launches at every level with a tracer (CPU test).

At metrics a launch is no event and the shim forwards it at once; with LOCKSTEP_DEBUG on it is
still timed as a "real call", once per launch however many of the shim's layers it passes, so
that the real calls of two levels compare (whether tracing makes the driver's launch slower).
Runs shim_launch_bench (the stand-in driver, fake_driver.cpp) under `lockstep run` at metrics
and broad and checks that each report counts every launch the bench made as one real call, and
the bench's one free (its allocation, made before the tracer exists, makes it) as one
"alloc call": the job's allocation calls timed apart from its other calls.

  bench/collectors/real_calls_timed.py --build build

Not evidence of GPU work: the stand-in driver's launches return at once.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shim_launch_bench import LINE, launches_made  # noqa: E402  (the bench's line, its count)

REPORT = re.compile(r"shim self time: (.*?); timing taken out")
REAL = re.compile(r"real call ([0-9]+) x [0-9]+ ns(?: \(\+([0-9]+) slow)?")  # slow ones apart
ALLOC = re.compile(r"alloc call ([0-9]+) x [0-9]+ ns(?: \(\+([0-9]+) slow)?")


def real_calls(build, level, launches, work):
    env = dict(os.environ, LOCKSTEP_DEBUG="1")
    env.pop("LD_PRELOAD", None)
    cmd = [os.path.join(build, "tools", "lockstep"), "run", "-o", os.path.join(work, level),
           "--level", level, "--", os.path.join(build, "bench", "collectors", "shim_launch_bench"),
           str(launches)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    bench = LINE.search(text)
    report = REPORT.search(text)
    if out.returncode != 0 or not bench:
        sys.exit(f"{level}: shim_launch_bench failed (exit {out.returncode}):\n{text[-3000:]}")
    made = launches_made(launches, int(bench.group(3)))
    def count(pattern):
        found = pattern.search(report.group(1)) if report else None
        return int(found.group(1)) + int(found.group(2) or 0) if found else 0
    return made, count(REAL), count(ALLOC), report.group(1) if report else "no report"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build", help="build folder (default build)")
    p.add_argument("--launches", type=int, default=2000)
    args = p.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory(prefix="lockstep-real-calls.") as work:
        for level in ("metrics", "broad"):
            made, real, alloc, report = real_calls(args.build, level, args.launches, work)
            ok = real == made and alloc == 1
            failed |= not ok
            print(f"{level}: {made} launches made, {real} real calls timed, {alloc} alloc calls "
                  f"(1 free): {'ok' if ok else 'WRONG'} ({report})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
