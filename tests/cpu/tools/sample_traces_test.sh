#!/usr/bin/env bash
# The real traces in examples/traces (made by the shim on the H200, each file ending with its
# end record): the deterministic pair is IDENTICAL (exit 0) and verify certifies it; the planted
# pair diverges (exit 1) with the planted kernel as the origin; no cut-off copy of a trace is
# ever identical, and --steps beyond the traces is an error (issue #32).
set -u
lockstep=$1 traces=$2
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

out=$("$lockstep" diff "$traces/cuda-det-full-1" "$traces/cuda-det-full-2")
rc=$?; [[ $rc -eq 0 ]] || fail "deterministic pair: exit $rc, expected 0: $out"
grep -q 'IDENTICAL' <<<"$out" || fail "deterministic pair: not IDENTICAL: $out"

out=$("$lockstep" diff "$traces/cuda-atomic-full-1" "$traces/cuda-atomic-full-2" --json)
rc=$?; [[ $rc -eq 1 ]] || fail "planted pair: exit $rc, expected 1"
grep -q '"classification": "origin"' <<<"$out" || fail "planted pair: no origin"
grep -q 'planted_atomic_sum_squares' <<<"$out" || fail "planted pair: origin is not the planted kernel"

for run in cuda-det-full-1 cuda-det-full-2 cuda-atomic-full-1 cuda-atomic-full-2; do
  out=$("$lockstep" verify "$traces/$run" 2>&1)
  rc=$?; [[ $rc -eq 0 ]] || fail "verify $run: exit $rc, expected 0: $out"
  grep -q 'CERTIFIED COMPLETE' <<<"$out" || fail "verify $run: $out"
done

# Issue #32 case 1: a cut-off copy of the planted run was IDENTICAL ("0 records in 0 steps").
file=$(ls "$traces"/cuda-atomic-full-1/*.lstrace)
size=$(stat -c %s "$file")
mkdir "$work/cut"
cp "$traces/cuda-atomic-full-1/manifest.json" "$work/cut/"
for bytes in 5264 $(seq 1 $((size / 23)) "$size"); do
  head -c "$bytes" "$file" > "$work/cut/x.lstrace"
  "$lockstep" diff "$work/cut" "$traces/cuda-atomic-full-2" >/dev/null 2>&1
  rc=$?; [[ $rc -ne 0 ]] || fail "cut at $bytes of $size bytes: exit 0 (identical)"
done
"$lockstep" diff --steps 1000-2000 "$traces/cuda-det-full-1" "$traces/cuda-det-full-2" >/dev/null 2>&1
rc=$?; [[ $rc -eq 2 ]] || fail "--steps beyond the trace: exit $rc, expected 2"
echo "PASS: sample traces"
