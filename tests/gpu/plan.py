#!/usr/bin/env python3
"""How long each group of the GPU suite took when it last ran, from the results JSONs (each row's
"seconds"), and which groups fit a session's device time: for planning runs on a lent GPU (30
minutes a session, 10 a command), where a group that does not fit comes back as SKIP rows.

  python3 tests/gpu/plan.py                      # every group, newest timing of each check
  python3 tests/gpu/plan.py --budget 1500 --checks abdesmrwpvjf

A check is a test of the suite (its rows' "test"; rows of older files without one, by name): its
time is its rows' "seconds" in the newest results JSON that ran it (not SKIP); a check never
timed (results written before rows carried seconds, or always skipped) is counted as unknown; a
test the suite no longer has is left out. Groups are listed in run.sh's order; "fits" keeps
adding them while their known total stays within --budget, and prints one CHECKS= string per
command of at most --per-command seconds. Reads results/*.json only; runs nothing.
"""
import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_suite import FEWER_GPUS, ORDER, ROOT  # noqa: E402


def read_results(paths, longest=False):
    """({group: {check: (seconds, file)}} from the newest file where each check ran timed (with
    `longest`, the file where it took longest),
    {group: set of every check named}, {group: checks never timed whose newest row skipped for
    want of GPUs}); a file that is not JSON: one line, exit 2.

    A check is the test that makes its rows, where rows name it ("test"): its time is written on
    its first row, and which rows it writes can depend on the outcome (the launch-bound test
    writes "launch-bound overhead" when it fails, "launch-bound ratios" and "launch-bound self
    time" when it runs through), so a row name of one outcome must not keep an old time beside
    the test's newer one. Rows of older files, without "test", are checks by their name, given
    over to the test that a newer file says makes them."""
    times, names, newest = {}, {}, {}
    by_name = set()  # (group, row name) of rows a test made: that name is the test's
    for path in sorted(paths, key=os.path.basename):  # names start with the UTC date and time
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"plan.py: {path}: not a results JSON ({e})", file=sys.stderr)
            sys.exit(2)
        if not isinstance(doc, dict) or doc.get("schema") != "lockstep-gpu-results":
            continue
        ran = {}  # (group, check) -> this file's seconds for it, over its rows that ran
        for row in doc.get("rows", []):
            if not isinstance(row, dict) or not row.get("group") or "check" not in row:
                continue
            group, test = row["group"], row.get("test")
            check = test if isinstance(test, str) and test else row["check"]
            if check != row["check"]:
                by_name.add((group, row["check"]))
            names.setdefault(group, set()).add(check)
            newest[(group, check)] = (row.get("result"), str(row.get("figure", "")))
            if row.get("result") != "SKIP" and isinstance(row.get("seconds"), (int, float)):
                ran[(group, check)] = ran.get((group, check), 0.0) + float(row["seconds"])
        for (group, check), seconds in ran.items():
            by_check = times.setdefault(group, {})
            if not (longest and check in by_check and by_check[check][0] >= seconds):
                by_check[check] = (seconds, os.path.basename(path))
    for group, name in by_name:
        times.get(group, {}).pop(name, None)
        names.get(group, set()).discard(name)
    # A test renamed or removed since is not a check of the suite any more.
    suite = suite_tests()
    for group in names:
        for check in [c for c in names[group] if "::" in c and c.split("[")[0] not in suite]:
            names[group].discard(check)
            times.get(group, {}).pop(check, None)
    more_gpus = {}
    for (group, check), (result, figure) in newest.items():
        if (result == "SKIP" and FEWER_GPUS.match(figure) and check in names.get(group, set())
                and check not in times.get(group, {})):
            more_gpus.setdefault(group, set()).add(check)
    return times, names, more_gpus


def suite_tests():
    """Every test of the GPU suite as results name it: "test_<group>_<name>.py::<function>"."""
    found = set()
    for path in glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_*.py")):
        with open(path) as f:
            found.update(f"{os.path.basename(path)}::{m}"
                         for m in re.findall(r"^def (test_\w+)", f.read(), re.M))
    return found


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--results", default=os.path.join(ROOT, "results"),
                   help="folder of results JSONs (default: results/)")
    p.add_argument("--checks", default=ORDER, help=f"groups to plan (default: all, {ORDER})")
    p.add_argument("--budget", type=float, default=1500,
                   help="seconds of device time for the suite (default 1500: a 30-minute "
                        "session less the machine's start and other runs)")
    p.add_argument("--per-command", type=float, default=540,
                   help="seconds one command may take (default 540: run.sh's BUDGET_S)")
    args = p.parse_args(argv)
    unknown = [g for g in args.checks if g not in ORDER]
    if unknown:
        p.error(f"--checks: no group {''.join(unknown)!r} (groups: {ORDER})")
    if not os.path.isdir(args.results):
        p.error(f"--results {args.results}: no such folder")
    paths = glob.glob(os.path.join(args.results, "*.json"))
    times, names, more_gpus = read_results(paths)
    print(f"{'group':<6} {'seconds':>8} {'timed':>6} {'untimed':>8}  newest timing from")
    plan, total, command, commands, untimed_groups = [], 0.0, "", [], []
    command_s = 0.0
    for g in (g for g in ORDER if g in args.checks):
        timed = times.get(g, {})
        seconds = sum(s for s, _ in timed.values())
        # A check that last skipped for want of GPUs is planned with them, not counted here.
        untimed = len(names.get(g, set()) - set(timed) - more_gpus.get(g, set()))
        files = sorted({f for _, f in timed.values()})
        print(f"{g:<6} {seconds:>8.0f} {len(timed):>6} {untimed:>8}  "
              f"{files[-1] if files else '-'}")
        if untimed or not timed:  # a group's time is known only when each of its checks is
            untimed_groups.append(g)
            continue
        if total + seconds > args.budget:
            continue
        total += seconds
        plan.append(g)
        if command and command_s + seconds > args.per_command:
            commands.append(command)
            command, command_s = "", 0.0
        command += g
        command_s += seconds
    if command:
        commands.append(command)
    print(f"fits {args.budget:.0f} s: {''.join(plan) or 'no timed group'} ({total:.0f} s)"
          + (": " + " ".join(f"CHECKS={c}" for c in commands) if commands else ""))
    wanting = {g: len(more_gpus[g]) for g in ORDER if g in args.checks and g in more_gpus}
    if wanting:
        print("skipped for want of GPUs when they last ran (two-GPU checks, planned where two "
              "are lent): " + ", ".join(f"{g} ({n})" for g, n in wanting.items()))
    if untimed_groups:
        print(f"not timed in full yet: {''.join(untimed_groups)} (their checks' seconds are in "
              "results JSONs written since rows carried them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
