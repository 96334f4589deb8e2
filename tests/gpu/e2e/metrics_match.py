#!/usr/bin/env python3
"""Checks that the losses a job printed appear in its trace as Metric records (issue 5).

    metrics_match.py LOCKSTEP TRACE_DIR JOB_STDOUT [--same-step]

The job prints "step N loss L loss_hex H" (H: float32 bits, big-endian hex). lockstep records
the small device-to-host copy behind loss.item() as a Metric record; `lockstep show` prints a
payload whose size is a multiple of 4 as f32 elements, each with its bits ("f32 6.985, ...
(0x40df8632 c513abd3 ...)"), and other sizes as bytes in memory order ("(0x24 8b c5 39 ...)");
the first 4 bytes are the loss. Every printed loss must appear among the rank's metric payloads,
in step order; with --same-step, the loss printed for step N must be a metric of the trace's
step N (a job that numbers its steps from the trace's: JAX's StepTraceAnnotation). Prints one
PASS/FAIL line; exit 0/1 (2 for unreadable input).
"""
import re
import subprocess
import sys

STEP_LINE = re.compile(r"^step (\d+) loss \S+ loss_hex ([0-9a-f]{8})\b")
METRIC_LINE = re.compile(r"^r(\d+) step (\d+) seq (\d+) .* metric .*\(0x([0-9a-f ]+)\)\s*$")


def printed_losses(text):
    """[(step, big-endian hex)] from the job's output."""
    return [(int(m.group(1)), m.group(2)) for m in map(STEP_LINE.match, text.splitlines()) if m]


def traced_metrics(text, rank=0, with_steps=False):
    """Big-endian hex of the first 4 payload bytes of each metric record of `rank`, seq order
    (with_steps: (step, hex) pairs)."""
    rows = []
    for m in map(METRIC_LINE.match, text.splitlines()):
        if not m or int(m.group(1)) != rank:
            continue
        payload = m.group(4).split()
        if payload and len(payload[0]) == 8:
            # 4-byte elements, each its bits big-endian: "f32 6.985, ... (0x40df8632 c513abd3 ...)"
            rows.append((int(m.group(3)), int(m.group(2)), payload[0]))
        elif len(payload) >= 4 and all(len(b) == 2 for b in payload[:4]):
            # raw bytes in memory order: "(0x24 8b c5 39 ...)"
            rows.append((int(m.group(3)), int(m.group(2)), "".join(reversed(payload[:4]))))
    return [(step, h) if with_steps else h for _, step, h in sorted(rows)]


def check(printed, traced):
    """One line: PASS if every printed loss appears in `traced` in order."""
    if not printed:
        return "FAIL: no step lines in the job's output"
    at = 0
    for step, want in printed:
        while at < len(traced) and traced[at] != want:
            at += 1
        if at == len(traced):
            return f"FAIL: step {step} loss {want} is not among the trace's metric records"
        at += 1
    return f"PASS: {len(printed)} losses found in order among {len(traced)} metric records"


def check_same_step(printed, traced):
    """One line: PASS if the loss printed for step N is a metric of the trace's step N."""
    if not printed:
        return "FAIL: no step lines in the job's output"
    for step, want in printed:
        if (step, want) not in traced:
            found = [s for s, h in traced if h == want]
            where = f"in step {found[0]}" if found else "not among the metric records"
            return f"FAIL: step {step} loss {want} is {where}"
    return f"PASS: {len(printed)} losses, each a metric of its own step"


def main(argv):
    same_step = "--same-step" in argv[4:]
    if len(argv) - same_step != 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    lockstep, trace_dir, stdout_path = argv[1:4]
    try:
        with open(stdout_path) as f:
            printed = printed_losses(f.read())
        shown = subprocess.run([lockstep, "show", trace_dir, "--rank", "0"], check=True,
                               stdout=subprocess.PIPE, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"FAIL: {e}")
        return 2
    line = (check_same_step(printed, traced_metrics(shown, with_steps=True)) if same_step
            else check(printed, traced_metrics(shown)))
    print(line)
    return 0 if line.startswith("PASS") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
