#!/usr/bin/env bash
# tests/gpu/run_parallel.sh: every check of tests/gpu/run.sh on a two-GPU machine in about half
# the time, in three lanes, then one table.
#
#   lane A (GPU 0):        e (PyTorch examples), v (CUPTI coverage, one-GPU jobs), p (replay)
#   lane B (GPU 1):        b (GPU gtests, compute-sanitizer), d (CUDA example); then, once lane C
#                          is done with GPU 1: c (hash benchmark), f (overhead); then, once lane
#                          A is done with GPU 0: o (DDP overhead on both GPUs)
#   lane C (GPUs 0 and 1): g (DDP on two GPUs), v (CUPTI coverage of the DDP job: NCCL)
#
# The benchmarks (c, f, o) wait for the lanes that use their GPUs so that no other job shares their GPU; lane A still
# runs on the other GPU meanwhile (the host has CPUs to spare). Environment as for run.sh
# (BUILD, OUT, PYTHON, KEEP, SAVE); BUDGET_S applies to each lane (default 520). Group x (TP x
# DP over every GPU) is not in a lane: run it on its own, e.g. CHECKS=ax tests/gpu/run.sh.
# Each lane writes its table and results JSON under OUT/<lane>; OUT gets the merged table, one
# results JSON for the whole run and lanes.tar.gz (the lanes' folders).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUTDIR=${OUT:-/tmp/lockstep-gpu}
export BUDGET_S=${BUDGET_S:-520}
mkdir -p "$OUTDIR"/{a,b,c}
if [[ $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') -lt 2 ]]; then
  echo "run_parallel.sh: needs two GPUs; use tests/gpu/run.sh" >&2
  exit 2
fi
START=$SECONDS
(CUDA_VISIBLE_DEVICES=0 OUT=$OUTDIR/a CHECKS=aevp COVERAGE_MODES="compile cuda-graph reduce-overhead" \
  "$ROOT/tests/gpu/run.sh" >"$OUTDIR/a/stdout.txt" 2>&1) &
lane_a=$!
(OUT=$OUTDIR/c CHECKS=gv COVERAGE_MODES=ddp "$ROOT/tests/gpu/run.sh" >"$OUTDIR/c/stdout.txt" 2>&1) &
lane_c=$!
(
  CUDA_VISIBLE_DEVICES=1 OUT=$OUTDIR/b CHECKS=bd "$ROOT/tests/gpu/run.sh" >"$OUTDIR/b/stdout.txt" 2>&1
  rc=$?
  while kill -0 "$lane_c" 2>/dev/null; do sleep 2; done
  export BUDGET_S=$((BUDGET_S - (SECONDS - START)))
  mkdir -p "$OUTDIR/b2"
  CUDA_VISIBLE_DEVICES=1 OUT=$OUTDIR/b2 CHECKS=cf "$ROOT/tests/gpu/run.sh" >"$OUTDIR/b2/stdout.txt" 2>&1
  rc=$((rc | $?))
  while kill -0 "$lane_a" 2>/dev/null; do sleep 2; done
  export BUDGET_S=$((BUDGET_S - (SECONDS - START)))
  mkdir -p "$OUTDIR/b3"
  OUT=$OUTDIR/b3 CHECKS=o "$ROOT/tests/gpu/run.sh" >"$OUTDIR/b3/stdout.txt" 2>&1
  exit $((rc | $?))
) &
lane_b=$!
failed=0
for lane in "$lane_a" "$lane_b" "$lane_c"; do wait "$lane" || failed=1; done
{
  echo
  echo "lockstep GPU checks (three lanes), $(date -u '+%Y-%m-%d %H:%M UTC'), $((SECONDS - START)) s"
  printf '%-24s %-6s %s\n' "check" "result" "key figure"
  printf '%-24s %-6s %s\n' "------------------------" "------" "----------"
  for lane in a b c b2 b3; do
    [[ -f $OUTDIR/$lane/table.txt ]] && tail -n +5 "$OUTDIR/$lane/table.txt"
  done
} >"$OUTDIR/table.txt"
cat "$OUTDIR/table.txt"
# One results file for the run: the lanes' rows in the table's order, under the lanes' commit.
LOCKSTEP_ROOT=$ROOT python3 - "$OUTDIR" a b c b2 b3 <<'PY'
import glob, json, os, sys
sys.path.insert(0, os.path.join(os.environ["LOCKSTEP_ROOT"], "tests", "gpu"))
from gpu_suite import suite_order
out, docs, order = sys.argv[1], [], suite_order(os.environ["LOCKSTEP_ROOT"])
for lane in sys.argv[2:]:
    docs += [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, lane, "2*.json")))]
if docs:
    doc = dict(docs[0], rows=[r for d in docs for r in d["rows"]],
               seconds=max(d["seconds"] for d in docs), source="tests/gpu/run_parallel.sh",
               groups="".join(g for g in order if any(g in d["groups"] for d in docs)))
    name = f"{doc['date'][:13].replace(':', '')}{doc['date'][14:16]}Z-" \
           f"{doc['commit'].replace('+', '-')}-{doc['groups']}.json"
    json.dump(doc, open(os.path.join(out, name), "w"), indent=1)
    print(f"results: {os.path.join(out, name)}")
PY
# The device machine brings back at most 8 files: the lanes' own files go in one archive.
tar -czf "$OUTDIR/lanes.tar.gz" -C "$OUTDIR" a b c b2 b3 2>/dev/null && rm -rf "$OUTDIR"/{a,b,c,b2,b3}
exit "$failed"
