#!/usr/bin/env python3
"""Checks that two traces of one deterministic job carry the same GEMM identities: every
cuBLASLt GEMM record's fields (shape, types, transposes, compute type, algorithm, workspace,
epilogue), GEMM by GEMM in call order.

    gemm_fields_match.py LOCKSTEP TRACE_A TRACE_B

Below level full a GEMM's fields come from copies of its cuBLASLt objects, read on the trace
writer's thread (collectors/lt_copies.h); at full from the objects, on the job's thread. A broad
and a full trace of one job must therefore agree field for field. `lockstep show --grep` prints a
GEMM as "... gemm cublasLtMatmul FIELDS | buffers": the fields are what is compared (the buffers
exist at full only). Prints one PASS/FAIL line; exit 0/1 (2 for unreadable input).
"""
import re
import subprocess
import sys

GEMM_LINE = re.compile(r"^r(\d+) step (\d+) seq \d+ .* gemm cublasLtMatmul (.*)$")


def gemm_fields(lockstep, trace):
    """[(rank, step, fields text)] of the trace's cuBLASLt GEMMs, in call order."""
    out = subprocess.run([lockstep, "show", trace, "--grep", "^cublasLtMatmul$"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise OSError(f"lockstep show {trace}: exit {out.returncode}: {out.stderr.strip()}")
    rows = []
    for m in map(GEMM_LINE.match, out.stdout.splitlines()):
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), m.group(3).split(" | ")[0].strip()))
    return rows


def check(a, b):
    if not a:
        return "FAIL: no cuBLASLt GEMM records in the first trace"
    if len(a) != len(b):
        return f"FAIL: {len(a)} cuBLASLt GEMMs against {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"FAIL: GEMM {i + 1} (rank {x[0]} step {x[1]}): '{x[2]}' against '{y[2]}'"
    shapes = len({x[2] for x in a})
    return f"PASS: {len(a)} cuBLASLt GEMMs, {shapes} distinct identities, field for field equal"


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        line = check(gemm_fields(argv[1], argv[2]), gemm_fields(argv[1], argv[3]))
    except OSError as e:
        print(f"FAIL: {e}")
        return 2
    print(line)
    return 0 if line.startswith("PASS") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
