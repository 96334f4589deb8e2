#!/usr/bin/env python3
"""`lockstep diff` and `verify` at the article's scale, judged against issue #34's targets, with
the figures kept as data.

Runs `lockstep_tools_diff_bench --scale` (bench/tools/diff_bench.cpp: two runs of 2,432 ranks x
200 steps x 200 records written with tools/synth, the diffs identical, diverging only in the last
step and one rank diverging in the first step, and `verify`, each `--repeats` times under
RLIMIT_NOFILE `--nofile`), reads the JSON line it prints, and writes it with what it was measured
on (commit, date, this machine's cores and load average before and after: a 2-core machine under
load gives a process about one core, so wall time follows the load) and each case's verdict to
results/tools/<date>-<commit>-diff-scale-<ranks>-<level>.json.

Targets (issue #34), wall seconds of the median run: identical 2 s, last step 5 s, first step 10
s, verify 10 s; every case's peak memory 256 MiB and its exit code the expected one (0, 1, 1, 0).
PASS when every case meets them, else FAIL (exit status 1).

  python3 bench/tools/diff_scale.py                       # build/, 2,432 ranks at broad
  python3 bench/tools/diff_scale.py --dir /tmp/runs --keep   # keep the runs; time them again
  python3 bench/tools/diff_scale.py --ranks 8 --repeats 1 --json /tmp/small.json
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "overhead"))
import run_facts  # noqa: E402  commit and date of the results file: their one home

ROOT = run_facts.ROOT
# case -> (wall seconds, expected exit code): issue #34's targets for the 2,432-rank runs.
TARGETS = {"identical": (2.0, 0), "last_step": (5.0, 1), "first_step": (10.0, 1),
           "verify": (10.0, 0)}
PEAK_MIB = 256.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "tools",
                                                   "lockstep_tools_diff_bench"),
                   help="the bench binary (default: build/bench/tools/lockstep_tools_diff_bench)")
    p.add_argument("--dir", default="/tmp/lockstep-diff-scale",
                   help="where the runs are written (runs already there are timed as they are)")
    p.add_argument("--keep", action="store_true", help="keep the runs for another timing")
    p.add_argument("--repeats", type=int, default=3, help="runs of each case; medians (default 3)")
    p.add_argument("--ranks", type=int, default=2432, help="ranks per run (default 2432, at least 8)")
    p.add_argument("--nofile", type=int, default=256,
                   help="RLIMIT_NOFILE of the timed commands (default 256, far below 2 x ranks)")
    p.add_argument("--level", default="broad", choices=["broad", "full"],
                   help="records as a run at this level writes them (default broad: the issue's "
                        "1.1-1.2 GB runs; full: 2.4 GB)")
    p.add_argument("--json", help="write here instead of results/tools/")
    return p.parse_args(argv)


def judge(result):
    """Each case's verdict against TARGETS and PEAK_MIB (only at the issue's 2,432 ranks: a
    smaller run is a smoke test, shown but not judged)."""
    judged = result["ranks"] >= 2432
    verdicts = {}
    for case, (limit_s, expect) in TARGETS.items():
        got = result["cases"].get(case)
        if got is None:
            verdicts[case] = "FAIL: not run"
            continue
        problems = []
        if got["exit"] != expect:
            problems.append(f"exit {got['exit']}, expected {expect}")
        if judged and got["wall_s"] > limit_s:
            problems.append(f"{got['wall_s']:.2f} s > {limit_s:g} s")
        if judged and got["peak_rss_mib"] > PEAK_MIB:
            problems.append(f"{got['peak_rss_mib']:.0f} MiB > {PEAK_MIB:g} MiB")
        verdicts[case] = "FAIL: " + ", ".join(problems) if problems else \
            ("PASS" if judged else "shown")
    return verdicts


def main(argv=None):
    args = parse_args(argv)
    if not os.access(args.bench, os.X_OK):
        print(f"diff_scale.py: {args.bench}: no bench binary (build the target "
              "lockstep_tools_diff_bench)", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    cmd = [args.bench, "--scale", args.dir, "keep" if args.keep else "drop", str(args.repeats),
           str(args.ranks), str(args.nofile), args.level]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(out.stdout)
    lines = [line for line in out.stdout.splitlines() if line.startswith('{"bench":"diff-scale"')]
    if not lines:
        print(f"diff_scale.py: the bench printed no result line (exit {out.returncode})",
              file=sys.stderr)
        return 2
    result = json.loads(lines[-1])
    result.update(run_facts.facts())
    result.update({"level": args.level, "host_cpus": os.cpu_count(),
                   "load_average_before": round(load_before[0], 2),
                   "load_average_after": round(os.getloadavg()[0], 2),
                   "targets": {case: {"wall_s": t, "exit": e, "peak_rss_mib": PEAK_MIB}
                               for case, (t, e) in TARGETS.items()}})
    verdicts = judge(result)
    result["verdicts"] = verdicts
    ok = all(not v.startswith("FAIL") for v in verdicts.values())
    # A run smaller than the is not judged against its targets: "shown", never PASS.
    result["verdict"] = ("PASS" if result["ranks"] >= 2432 else "shown") if ok else "FAIL"
    path = args.json
    if path is None:
        date = result["date"]  # 2026-12-04T15:03:27Z -> 2026-12-04T1503Z, as results/ names runs
        stamp = f"{date[:13]}{date[14:16]}Z"
        path = os.path.join(ROOT, "results", "tools",
                            f"{stamp}-{result['commit']}-diff-scale-{args.ranks}-{args.level}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"\nload average {result['load_average_before']} before, "
          f"{result['load_average_after']} after, {result['host_cpus']} cores")
    for case, verdict in verdicts.items():
        c = result["cases"].get(case, {})
        print(f"{case:<11} {verdict:<6} wall {c.get('wall_s', 0):.2f} s (target "
              f"{TARGETS[case][0]:g} s), cpu {c.get('user_s', 0) + c.get('sys_s', 0):.2f} s, "
              f"peak {c.get('peak_rss_mib', 0):.0f} MiB")
    print(f"diff-scale: {result['verdict']}; {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
