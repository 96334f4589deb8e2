#!/usr/bin/env python3
"""Checks a `lockstep diff --json` (or `lockstep hunt --json`) report against expectations.

  check_diff.py REPORT.json --expect identical
  check_diff.py REPORT.json --expect divergent --step 3 --name planted_atomic \
      --classification origin [--rank 1] [--culprit-rank 1] [--receiver-rank 0]
  check_diff.py REPORT.json --expect divergent --step 3 --buffer-label A_scale \
      --buffer-op cublasLtMatmul

Prints one line, "PASS: <key figure>" or "FAIL: <why>", and exits 0 (pass), 1 (fail) or 2 (the
report cannot be read). Everything that knows the JSON schema is in the Report class below, so
that a schema change is a change in one place.
"""

import argparse
import json
import re
import sys


class Report:
    """Reads tools' diff JSON ("schema": "lockstep-diff"): verdict, first_divergence {rank, step,
    kind, name, classification, buffer {role, label, ...}}, culprit_rank, culprit, per_rank [],
    structural [], metric_divergence. A hunt report may wrap a diff report under "diff" or
    "result"; the first object that has a "verdict" is used."""

    def __init__(self, doc):
        self.doc = self._find_diff(doc)
        if self.doc is None:
            raise ValueError("no object with a 'verdict' key")

    @staticmethod
    def _find_diff(doc):
        if isinstance(doc, dict):
            if "verdict" in doc:
                return doc
            for key in ("diff", "result", "final", "full"):
                found = Report._find_diff(doc.get(key))
                if found is not None:
                    return found
            for value in doc.values():
                found = Report._find_diff(value)
                if found is not None:
                    return found
        elif isinstance(doc, list):
            for value in doc:
                found = Report._find_diff(value)
                if found is not None:
                    return found
        return None

    @property
    def verdict(self):
        return str(self.doc.get("verdict", "")).lower()

    @property
    def first(self):
        return self.doc.get("first_divergence") or self.doc.get("culprit")

    @property
    def culprit_rank(self):
        rank = self.doc.get("culprit_rank")
        if rank is None and isinstance(self.doc.get("culprit"), dict):
            rank = self.doc["culprit"].get("rank")
        return rank

    def divergences(self):
        """Every divergence object in the report: first, culprit, per rank, structural."""
        out = []
        for key in ("first_divergence", "culprit"):
            if isinstance(self.doc.get(key), dict):
                out.append(self.doc[key])
        for key in ("per_rank", "structural", "receivers"):
            out.extend(d for d in self.doc.get(key) or [] if isinstance(d, dict))
        unique, seen = [], set()
        for d in out:
            key = json.dumps(d, sort_keys=True)
            if key not in seen:
                seen.add(key)
                unique.append(d)
        return unique

    @property
    def metric(self):
        return self.doc.get("metric_divergence")

    @property
    def state(self):
        """The earliest State record (a parameter's fingerprint) that differs, or None."""
        return self.doc.get("state_divergence")


def buffer_label(div):
    buf = div.get("buffer") if isinstance(div, dict) else None
    return buf.get("label") if isinstance(buf, dict) else None


def scope_of(div):
    """A divergence's scope (schema 5: the ranges open on its op's thread, outermost first) as
    one string, "GPT (forward) / blocks.1.mlp (forward)"; "" for none (or an older report)."""
    scope = div.get("scope") if isinstance(div, dict) else None
    return " / ".join(scope) if isinstance(scope, list) else ""


def describe(div):
    if not isinstance(div, dict):
        return "none"
    parts = [f"rank {div.get('rank')}", f"step {div.get('step')}",
             str(div.get("classification")), f"{div.get('kind')} {short(div.get('name'))}"]
    label = buffer_label(div)
    if label:
        role = div["buffer"].get("role", "")
        parts.append(f"buffer {label}({role})")
    if scope_of(div):
        parts.append(f"scope {scope_of(div)}")
    return ", ".join(parts)


def short(name, width=60):
    name = str(name or "")
    return name if len(name) <= width else name[:width - 3] + "..."


def check(report, args):
    """Returns (ok, message)."""
    if args.expect == "identical":
        if report.verdict != "identical":
            return False, f"verdict {report.verdict!r}, first: {describe(report.first)}"
        stats = report.doc.get("stats") or {}
        # Steps whose summaries (a digest over every record) match are not compared record by
        # record: "0 records" then means every step was equal as a whole.
        return True, (f"identical ({stats.get('records_compared', '?')} records compared, "
                      f"{stats.get('steps_skipped', '?')} steps equal by summary)")

    if report.verdict != "divergent":
        return False, f"verdict {report.verdict!r}, expected divergent"
    first = report.first
    if not isinstance(first, dict) and isinstance(report.state, dict):
        first = report.state  # only state records differed
    if not isinstance(first, dict):
        return False, "divergent but no first_divergence"
    problems = []
    if args.state_step is not None:
        state = report.state if isinstance(report.state, dict) else {}
        if state.get("step") != args.state_step:
            problems.append(f"state differs first at step {state.get('step')} (expected "
                            f"{args.state_step}: {state.get('name')})")
    if args.step is not None and first.get("step") != args.step:
        problems.append(f"step {first.get('step')} != {args.step}")
    if args.job_step is not None and first.get("job_step") != args.job_step:
        problems.append(f"job step {first.get('job_step')} != {args.job_step}")
    if args.rank is not None and first.get("rank") != args.rank:
        problems.append(f"rank {first.get('rank')} != {args.rank}")
    if args.name and not re.search(args.name, str(first.get("name", ""))):
        problems.append(f"name {short(first.get('name'))!r} !~ /{args.name}/")
    if args.classification and str(first.get("classification")) != args.classification:
        problems.append(f"classification {first.get('classification')} != {args.classification}")
    if args.scope and not re.search(args.scope, scope_of(first)):
        problems.append(f"scope {scope_of(first)!r} !~ /{args.scope}/")
    if args.culprit_rank is not None and report.culprit_rank != args.culprit_rank:
        problems.append(f"culprit rank {report.culprit_rank} != {args.culprit_rank}")
    if args.receiver_rank is not None:
        # Issue 8: the rank that only received the difference shows it at a collective, as a
        # receiver, not as an origin.
        got = [d for d in report.divergences() if d.get("rank") == args.receiver_rank]
        if not any(str(d.get("classification")) == "receiver"
                   and re.search(args.receiver_name, str(d.get("name", "")))
                   for d in got):
            seen = "; ".join(describe(d) for d in got) or "nothing"
            problems.append(f"rank {args.receiver_rank} not a receiver at /{args.receiver_name}/"
                            f" (rank {args.receiver_rank}: {seen})")
    if args.buffer_label:
        # The label must be on a divergence of an op named like --buffer-op (default --name) at
        # the expected step: the first divergence, or a receiver listed elsewhere.
        op = args.buffer_op or args.name
        hits = [d for d in report.divergences()
                if buffer_label(d) == args.buffer_label
                and (args.step is None or d.get("step") == args.step)
                and (not op or re.search(op, str(d.get("name", ""))))]
        if not hits:
            problems.append(f"no divergence of /{op or '.*'}/ with buffer {args.buffer_label}")
    if problems:
        return False, "; ".join(problems) + f" (first: {describe(first)})"
    culprit = f", culprit rank {report.culprit_rank}" if report.culprit_rank is not None else ""
    state = report.state
    state = (f", state first differs at step {state.get('step')} ({short(state.get('name'), 40)})"
             if isinstance(state, dict) else "")
    return True, describe(first) + culprit + state


def first_json_object(text):
    """The first JSON object that starts a line: tolerates text before it (a hunt prints its
    stages first, and kernel names there may hold braces)."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"^\{", text, re.MULTILINE):
        try:
            return decoder.raw_decode(text[m.start():])[0]
        except ValueError:
            continue
    raise ValueError("no JSON object")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("report")
    p.add_argument("--expect", choices=["identical", "divergent"], required=True)
    p.add_argument("--step", type=int)
    p.add_argument("--job-step", type=int,
                   help="the first divergence is at the job's step N (number alignment)")
    p.add_argument("--rank", type=int)
    p.add_argument("--culprit-rank", type=int)
    p.add_argument("--name", help="regex the first divergent op's name must match")
    p.add_argument("--classification", help="origin, receiver, structural, metric")
    p.add_argument("--scope", help="regex the first divergence's scope (its levels joined by "
                                   "' / ') must match")
    p.add_argument("--receiver-rank", type=int,
                   help="this rank must be reported as a receiver at a collective")
    p.add_argument("--receiver-name", default="(?i)all_?reduce",
                   help="regex for the receiving op's name (default: (?i)all_?reduce)")
    p.add_argument("--buffer-label", help="a divergent buffer with this label must be reported")
    p.add_argument("--buffer-op", help="regex: the op that reports --buffer-label")
    p.add_argument("--state-step", type=int,
                   help="the earliest differing State record (a parameter) is at this step")
    args = p.parse_args(argv)
    try:
        with open(args.report) as f:
            text = f.read()
        report = Report(first_json_object(text))
    except (OSError, ValueError) as e:
        print(f"FAIL: cannot read {args.report}: {e}")
        return 2
    ok, message = check(report, args)
    print(("PASS: " if ok else "FAIL: ") + message)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
