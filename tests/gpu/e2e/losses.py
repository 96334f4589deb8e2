#!/usr/bin/env python3
"""Compares the per-step losses that two runs of an example printed, as bytes.

  losses.py A.out B.out [--expect same|differ] [--differ-from-step S]

Reads the "loss_hex H" tokens of lines that start with "step N" or "rank R step N" (the CUDA
example's whole line is compared, since it carries several checksums). Prints one line,
"PASS: ..." or "FAIL: ...", exit 0 / 1 (2: a file cannot be read or holds no steps).
"""

import argparse
import re
import sys

LINE = re.compile(r"^(?:rank (\d+) )?step (\d+) (.*)$")


def read_steps(path):
    """{(rank, step): text after the step number} from the lines that print a step."""
    steps = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line.strip())
            if m:
                steps[(int(m.group(1) or 0), int(m.group(2)))] = m.group(3).strip()
    return steps


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--expect", choices=["same", "differ"], default="same")
    p.add_argument("--differ-from-step", type=int,
                   help="with --expect differ: steps before this one must be the same")
    args = p.parse_args(argv)
    try:
        a, b = read_steps(args.a), read_steps(args.b)
    except OSError as e:
        print(f"FAIL: {e}")
        return 2
    if not a or not b:
        print(f"FAIL: no step lines in {args.a if not a else args.b}")
        return 2
    if set(a) != set(b):
        print(f"FAIL: different steps: {len(a)} vs {len(b)} lines")
        return 1
    differing = sorted(k for k in a if a[k] != b[k])
    first = f"rank {differing[0][0]} step {differing[0][1]}" if differing else "none"
    if args.expect == "same":
        ok = not differing
        msg = f"{len(a)} steps bit-identical" if ok else f"first differing: {first}"
    else:
        ok = bool(differing) and (args.differ_from_step is None
                                  or min(s for _, s in differing) >= args.differ_from_step)
        msg = f"{len(differing)} of {len(a)} differ, first {first}"
    print(("PASS: " if ok else "FAIL: ") + msg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
