#!/usr/bin/env python3
"""Coverage table of a LOCKSTEP_VALIDATE=1 run: sums DIR/coverage-<pid>.json (one per process,
written by the shim at exit) and prints one row per source.

    python3 tests/gpu/e2e/coverage.py DIR

Last line: `PASS: N/N kernels accounted ...` or `FAIL: ...`. Exit 0 when every executed kernel
(lockstep's own hash kernels excluded) is accounted for and no activity record was dropped;
1 when a kernel was missed or records were dropped (coverage then unknown); 2 on bad input.
"""
import glob
import json
import os
import sys

SOURCES = ["nvcc_stub", "runtime_launch", "driver_triton", "cublas", "nccl", "graph_replay", "other"]
TOTALS = ["kernels", "accounted", "missed", "shim_internal", "own_hash_kernels", "dropped_records"]


def load(directory):
    paths = sorted(glob.glob(os.path.join(directory, "coverage-*.json")))
    if not paths:
        print(f"{directory}: no coverage-*.json (was LOCKSTEP_VALIDATE=1 set, CUPTI found?)")
        sys.exit(2)
    reports = []
    for path in paths:
        try:
            with open(path) as f:
                report = json.load(f)
            for key in TOTALS + ["sources", "missed_kernels"]:
                if key not in report:
                    raise ValueError(f"no '{key}'")
        except (OSError, ValueError) as e:
            print(f"{path}: {e}")
            sys.exit(2)
        reports.append(report)
    return paths, reports


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    paths, reports = load(argv[1])
    total = {k: sum(r[k] for r in reports) for k in TOTALS}
    rows = {s: {"accounted": 0, "missed": 0, "by_launch_hook": 0} for s in SOURCES}
    missed = {}
    for r in reports:
        for source, counts in r["sources"].items():
            row = rows.setdefault(source, {"accounted": 0, "missed": 0, "by_launch_hook": 0})
            for k in row:
                row[k] += counts.get(k, 0)
        for k in r["missed_kernels"]:
            missed[k["name"]] = missed.get(k["name"], 0) + k["count"]

    print(f"{len(paths)} process(es)")
    print(f"{'source':<16}{'accounted':>11}{'missed':>9}{'via launch hook':>17}")
    for source, row in rows.items():
        print(f"{source:<16}{row['accounted']:>11}{row['missed']:>9}{row['by_launch_hook']:>17}")
    print(f"{'total':<16}{total['accounted']:>11}{total['missed']:>9}")
    print(f"excluded: {total['own_hash_kernels']} lockstep hash kernels, "
          f"{total['shim_internal']} shim-internal (e.g. NCCL setup)")
    for name, count in sorted(missed.items(), key=lambda kv: -kv[1])[:20]:
        print(f"missed {count:>6}  {name[:110]}")
    figure = (f"{total['accounted']}/{total['kernels']} kernels accounted, {total['missed']} missed, "
              f"{total['dropped_records']} records dropped")
    ok = total["missed"] == 0 and total["dropped_records"] == 0 and total["kernels"] > 0
    print(("PASS: " if ok else "FAIL: ") + figure)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
