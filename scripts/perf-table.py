#!/usr/bin/env python3
"""Generates the performance tables from the latest results (results/*.json, one file per GPU
suite run: tests/gpu/run.sh writes it under $OUT; copy it into results/ and run this).

    scripts/perf-table.py            # rewrites the tables in docs/performance.md and README.md
    scripts/perf-table.py --check    # exit 1 if either differs from what the results give

The latest results: each check from the newest run that gave it (a rerun of a few checks
replaces those checks only; a SKIP row never hides an older run's result). docs/performance.md gets every such row with its
run; README.md a short table of the key rows (KEY below). Each table sits between
'<!-- perf-table:NAME begin -->' and '<!-- perf-table:NAME end -->' lines, replaced whole.
To add a key row to README: a line in KEY.
"""

import argparse
import glob
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
from gpu_suite import suite_order  # noqa: E402  (the groups' order: tests/gpu/run.sh's ORDER)

ORDER = suite_order(ROOT)
# README's rows: (check, how much of the figure: "head" = up to its first top-level ", " or
# "; ", "all" = the whole figure).
KEY = [("overhead off", "head"), ("overhead metrics", "head"), ("overhead broad", "head"),
       ("overhead full", "head"), ("overhead explicit-attention full", "head"),
       ("overhead unseen full", "head"), ("launch-bound self time", "all"),
       ("ddp 1 rank self time", "head"), ("tpdp overhead broad", "head"), ("hash bench", "head")]


def load(folder):
    docs = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        doc["file"] = os.path.basename(path)
        docs.append(doc)
    return docs


def latest_rows(docs):
    """[(row, doc)] in the suite's group order: each check from the newest run that gave it (a
    run of a few checks of a group, a rerun say, replaces those checks only). A SKIP row (the
    check did not run: time budget, no GPU pair) gives nothing: an older run's result stays,
    and the SKIP shows only for a check no run ever gave."""
    taken, picked, skipped = set(), [], {}
    for doc in sorted(docs, key=lambda d: d["date"], reverse=True):
        for row in doc["rows"]:
            if row["check"] in taken:
                continue
            if row["result"] == "SKIP":
                skipped.setdefault(row["check"], (row, doc))
                continue
            taken.add(row["check"])
            picked.append((row, doc))
    picked += [item for check, item in skipped.items() if check not in taken]

    def rank(item):
        row, doc = item
        group = row.get("group") or doc["groups"][0]
        return ORDER.index(group) if group in ORDER else len(ORDER)
    return sorted(picked, key=rank)  # stable: a run's rows keep their order


def head(figure):
    depth = 0
    for i, ch in enumerate(figure):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and figure[i:i + 2] in (", ", "; "):
            return figure[:i]
    return figure


def cell(text):
    return text.replace("|", "\\|")


def full_table(picked):
    lines = ["| check | result | figure | run |", "| --- | --- | --- | --- |"]
    for row, doc in picked:
        run = f"{doc['commit']}, {doc['date'][:10]}, {doc.get('gpus') or 1}x {doc.get('gpu')}"
        lines.append(f"| {cell(row['check'])} | {row['result']} | {cell(row['figure'])} | "
                     f"[{run}](../results/{doc['file']}) |")
    return lines


def key_table(picked):
    by_check = {row["check"]: (row, doc) for row, doc in picked}
    commits = sorted({by_check[c][1]["commit"] for c, _ in KEY if c in by_check})
    commit = ", ".join(commits) or "-"
    lines = [f"Key rows of the latest GPU suite runs (commit {commit}; every row,",
             "the method and the targets: [docs/performance.md](docs/performance.md)):", "",
             "| check | result | figure |", "| --- | --- | --- |"]
    for check, how in KEY:
        if check in by_check:
            row = by_check[check][0]
            figure = head(row["figure"]) if how == "head" else row["figure"]
            lines.append(f"| {cell(check)} | {row['result']} | {cell(figure)} |")
    return lines


def replace(text, name, lines, path):
    begin, end = f"<!-- perf-table:{name} begin -->", f"<!-- perf-table:{name} end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"perf-table.py: {path}: no '{begin}' ... '{end}' lines")
    before, rest = text.split(begin, 1)
    _, after = rest.split(end, 1)
    return before + begin + "\n" + "\n".join(lines) + "\n" + end + after


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare, do not write")
    p.add_argument("--results", default=os.path.join(ROOT, "results"))
    p.add_argument("--root", default=ROOT, help="where README.md and docs/ are")
    args = p.parse_args(argv)
    try:
        docs = load(args.results)
    except (OSError, ValueError, KeyError) as e:
        print(f"perf-table.py: {args.results}: {e}", file=sys.stderr)
        return 2
    if not docs:
        print(f"perf-table.py: {args.results}: no results files", file=sys.stderr)
        return 2
    picked = latest_rows(docs)
    stale = []  # (file, new text): both are made before either is written
    for rel, name, lines in (("docs/performance.md", "full", full_table(picked)),
                             ("README.md", "key", key_table(picked))):
        path = os.path.join(args.root, rel)
        with open(path) as f:
            text = f.read()
        new = replace(text, name, lines, path)
        if new != text:
            stale.append((rel, new))
    if not args.check:
        for rel, new in stale:
            with open(os.path.join(args.root, rel), "w") as f:
                f.write(new)
        return 0
    if stale:
        print(f"perf-table.py: {', '.join(rel for rel, _ in stale)}: tables differ from results/ "
              "(run scripts/perf-table.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
