#!/usr/bin/env python3
"""Where a full trace's hashed bytes go: per step, the bytes full read on the GPU (outputs hashed
after their op, inputs hashed afresh before it) and the bytes it did not read (inputs whose
digest was reused, outputs learned read-only, fills recalled, views given an enclosing region's
digest), by record name. Full's device time is these bytes (issue #34: the floors of full's
targets); this says which ops and which reasons make them.

  bench/overhead/full_bytes.py runs/a                   # steps 1 and later, per step
  bench/overhead/full_bytes.py runs/a --step 6 --top 30
  bench/overhead/full_bytes.py runs/a --step 6 --by launches   # which calls ask for hash launches
  bench/overhead/full_bytes.py runs/a --json out.json --lockstep build/tools/lockstep

It reads `lockstep show DIR` (one line per record, in the order the process made the calls) and
replays the shim's digest reuse (collectors/region_digests.h) on it, loosely: an input is reused
when the same region (allocation, offset, bytes) was hashed before, as an input or an output, and
nothing wrote that allocation over it since; a kernel's output writes its allocation from its
pointer on (its extent is a guess), another op's only its extent (GEMM, collective, copy, set). A
digest still in flight is reusable only on the stream that hashes it; this replay does not follow
streams, so on a multi-stream job it counts a few inputs reused that the shim hashed. Compare its
total with the shim's own count (LOCKSTEP_DEBUG=1: "hash launches: N (R regions, B bytes)").

An input hashed afresh has one of three reasons:
  new      nothing in its allocation was hashed before (the first read of a weight, a batch)
  extent   its allocation was hashed, but not this start and length (a view, a slice)
  written  this very region was hashed, then written by something that did not hash it again
Exit status: 0 done, 2 no trace or a `lockstep show` that failed.
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REASONS = ("new", "extent", "written")

# `| in arg0 bytes 524288B 66b354dba1350aa4 read-only @6+0` (tools/record_text.cpp): role,
# label, dtype, bytes, fingerprint (or -, dropped, unwritten), flags, allocation ordinal+offset.
BUFFER = re.compile(r"\| (in|out) \S+ \S+ (\d+)B (\S+)((?: [a-z-]+)*?) @(\d+)\+(\d+)")
HEAD = re.compile(r"^r(\d+) step (\d+) seq \d+ stream \S+ thread \S+ (\S+) (\S+)")


class Replay:
    """The digest-reuse replay of one rank's records, in sequence order."""

    def __init__(self):
        self.known = collections.defaultdict(set)  # ordinal -> {(offset, bytes)} reusable now
        self.ever = collections.defaultdict(set)   # ordinal -> {(offset, bytes)} ever hashed

    def record(self, kind, buffers, tally):
        """Feeds one record's buffers [(role, bytes, fingerprint, flags, ordinal, offset)];
        adds what full read and did not read to `tally` (a Counter), and under "afresh records"
        1 when any input was hashed afresh: the shim launches a hash before such a call (alone,
        or carrying the previous call's outputs), where a call with every input digest known
        chains onto the next launch."""
        afresh = False
        for role, size, fp, flags, ordinal, offset in buffers:
            if role != "in":
                continue
            # No value ("-"): recorded, not hashed (a GEMM's C under beta 0, a captured call).
            if fp in ("unwritten", "dropped", "-") or "enclosing" in flags:
                tally["in not read"] += size
                continue
            region = (offset, size)
            if region in self.known[ordinal]:
                tally["in reused"] += size
                continue
            reason = ("written" if region in self.ever[ordinal]
                      else "extent" if self.ever[ordinal] else "new")
            tally["in afresh " + reason] += size
            afresh = True
            self.known[ordinal].add(region)
            self.ever[ordinal].add(region)
        for role, size, fp, flags, ordinal, offset in buffers:
            if role != "out":
                continue
            # A kernel may write past its guessed extent: from its pointer to the allocation's end.
            end = None if kind == "kernel" else offset + size
            self.known[ordinal] = {(o, b) for o, b in self.known[ordinal]
                                   if o + b <= offset or (end is not None and o >= end)}
        for role, size, fp, flags, ordinal, offset in buffers:
            if role == "in":
                if "read-only" in flags:
                    tally["out read-only"] += size
                continue
            if fp in ("dropped", "-"):
                continue
            tally["out recalled" if "recalled" in flags else "out hashed"] += size
            self.known[ordinal].add((offset, size))
            self.ever[ordinal].add((offset, size))
        if afresh:
            tally["afresh records"] += 1


def parse_line(line):
    """(rank, step, kind, name, buffers) of one `lockstep show` line, or None."""
    head = HEAD.match(line)
    if head is None:
        return None
    buffers = [(role, int(size), fp, flags, int(ordinal), int(offset))
               for role, size, fp, flags, ordinal, offset in BUFFER.findall(line)]
    return int(head.group(1)), int(head.group(2)), head.group(3), head.group(4), buffers


def hashed(tally):
    return tally["out hashed"] + sum(tally["in afresh " + r] for r in REASONS)


def analyse(lines, step=None, first_step=1):
    """Per name and in total: the tallies over the steps counted (`step`, or first_step on)."""
    replays = collections.defaultdict(Replay)
    by_name = collections.defaultdict(collections.Counter)
    total = collections.Counter()
    steps = set()
    for line in lines:
        parsed = parse_line(line)
        if parsed is None:
            continue
        rank, record_step, kind, name, buffers = parsed
        tally = collections.Counter()
        replays[rank].record(kind, buffers, tally)
        if (record_step == step) if step is not None else record_step >= first_step:
            steps.add(record_step)
            key = f"{kind} {name}"
            by_name[key].update(tally)
            by_name[key]["records"] += 1
            total.update(tally)
            total["records"] += 1
    return {"steps": sorted(steps), "ranks": len(replays), "total": total, "by_name": by_name}


def report(result, top, by="bytes"):
    steps = max(1, len(result["steps"]))
    total = result["total"]
    gb = lambda b: f"{b / steps / 1e9:.2f} GB"  # noqa: E731
    span = (f"step {result['steps'][0]}" if len(result["steps"]) == 1 else
            f"steps {result['steps'][0]}-{result['steps'][-1]}, per step" if result["steps"] else
            "no step")
    out = [f"full_bytes: {span}, {result['ranks']} rank(s)",
           f"  read (hashed): {gb(hashed(total))}: outputs {gb(total['out hashed'])}, inputs "
           f"afresh {gb(sum(total['in afresh ' + r] for r in REASONS))} ("
           + ", ".join(f"{r} {gb(total['in afresh ' + r])}" for r in REASONS) + ")",
           f"  not read: inputs reused {gb(total['in reused'])}, outputs learned read-only "
           f"{gb(total['out read-only'])}, fills recalled {gb(total['out recalled'])}, "
           f"unwritten or enclosing inputs {gb(total['in not read'])}",
           f"  calls with an input hashed afresh (a hash launch before each): "
           f"{total['afresh records'] / steps:.0f} of {total['records'] / steps:.0f}",
           f"  {'hashed MB':>10} {'out MB':>9} {'afresh new/extent/written MB':>29} {'records':>8}"
           f" {'afresh':>7}  name"]
    key = (lambda kv: -kv[1]["afresh records"]) if by == "launches" else (lambda kv: -hashed(kv[1]))
    ranked = sorted(result["by_name"].items(), key=key)
    for name, t in ranked[:top]:
        afresh = "/".join(f"{t['in afresh ' + r] / steps / 1e6:.0f}" for r in REASONS)
        out.append(f"  {hashed(t) / steps / 1e6:10.1f} {t['out hashed'] / steps / 1e6:9.1f} "
                   f"{afresh:>29} {t['records'] / steps:8.0f} {t['afresh records'] / steps:7.0f}"
                   f"  {name[:100]}")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", help="a trace directory (lockstep run -o DIR --level full)")
    p.add_argument("--step", type=int, help="only this step (default: step 1 on, per step)")
    p.add_argument("--top", type=int, default=20, help="names listed (default 20)")
    p.add_argument("--by", choices=("bytes", "launches"), default="bytes",
                   help="rank names by the bytes they make full read (default) or by their calls "
                        "with an input hashed afresh (the hash launches they ask for)")
    p.add_argument("--lockstep", help="the CLI (default: build/tools/lockstep, then PATH)")
    p.add_argument("--json", help="write the totals and the per-name tallies here")
    args = p.parse_args(argv)
    cli = args.lockstep or os.path.join(ROOT, "build", "tools", "lockstep")
    if not os.path.exists(cli):
        cli = shutil.which("lockstep")
    if cli is None:
        print("full_bytes.py: no lockstep CLI (build it, or pass --lockstep)", file=sys.stderr)
        return 2
    if not os.path.exists(args.trace):
        print(f"full_bytes.py: {args.trace}: no such trace", file=sys.stderr)
        return 2
    # show's own error (one line) is read after its records: it writes nothing else there.
    show = subprocess.Popen([cli, "show", args.trace], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    result = analyse(show.stdout, step=args.step)
    problem = show.stderr.read().strip().splitlines()
    if show.wait() != 0:
        print(f"full_bytes.py: {args.trace}: lockstep show failed (exit {show.returncode})"
              + (f": {problem[-1]}" if problem else ""), file=sys.stderr)
        return 2
    print(report(result, args.top, args.by))
    if args.json:
        steps = max(1, len(result["steps"]))
        with open(args.json, "w") as f:
            json.dump({"trace": args.trace, "steps": result["steps"], "ranks": result["ranks"],
                       "per_step_bytes": {k: v / steps for k, v in result["total"].items()},
                       "by_name": {n: dict(t) for n, t in result["by_name"].items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
