#!/usr/bin/env python3
"""Checks that two traced runs recorded the same output digests for the kernels of one name.

    out_digests.py LOCKSTEP DIR_A DIR_B --kernel REGEX [--min N]

Runs `lockstep show` on both traces and takes, for rank 0's kernel records whose name matches
REGEX (searched), in sequence order, the fingerprint of each output buffer ("| out LABEL DTYPE
BYTES FINGERPRINT ..."). PASS when both lists are equal, hold at least N digests (default 1) and
none is missing ("-"): the same op on the same inputs, hashed in two runs that differ only in
what came after it (tests/gpu/jobs/held_hashes.py). Prints one PASS/FAIL line; exit 0/1 (2 for
an unreadable trace).
"""
import argparse
import re
import subprocess
import sys

KERNEL_LINE = re.compile(r"^r(\d+) step \d+ seq (\d+) stream \d+ thread \d+ kernel (\S+)")


def out_digests(text, kernel, rank=0):
    """[fingerprint] of the out buffers of rank's kernels whose name matches `kernel`, seq order."""
    rows = []
    for line in text.splitlines():
        m = KERNEL_LINE.match(line)
        if not m or int(m.group(1)) != rank or not re.search(kernel, m.group(3)):
            continue
        for part in line.split(" | ")[1:]:
            words = part.split()
            if len(words) >= 5 and words[0] == "out":
                rows.append((int(m.group(2)), words[4]))
    return [digest for _, digest in sorted(rows, key=lambda r: r[0])]


def check(a, b, minimum):
    """One line: PASS when the two lists are equal, long enough and complete."""
    if len(a) < minimum or len(b) < minimum:
        return f"FAIL: {len(a)} and {len(b)} output digests, at least {minimum} expected"
    if "-" in a or "-" in b:
        return "FAIL: an output digest is missing"
    if a != b:
        first = next(i for i, (x, y) in enumerate(zip(a + [None], b + [None])) if x != y)
        return (f"FAIL: output {first + 1} of {max(len(a), len(b))} differs "
                f"({a[first] if first < len(a) else 'none'} against "
                f"{b[first] if first < len(b) else 'none'})")
    return f"PASS: {len(a)} output digests equal"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lockstep")
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--min", type=int, default=1)
    args = parser.parse_args()
    texts = []
    for trace in (args.a, args.b):
        proc = subprocess.run([args.lockstep, "show", trace], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            print(f"FAIL: lockstep show {trace}: {proc.stderr.strip()[-300:]}")
            return 2
        texts.append(proc.stdout)
    line = check(out_digests(texts[0], args.kernel), out_digests(texts[1], args.kernel), args.min)
    print(line)
    return 0 if line.startswith("PASS") else 1


if __name__ == "__main__":
    sys.exit(main())
