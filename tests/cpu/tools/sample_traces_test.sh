#!/usr/bin/env bash
# The real traces in examples/traces (made by the shim on the H200). They were written before
# the writer's end record existed, so no verdict may call them whole: the deterministic pair is
# INCOMPLETE (exit 2, "no end record"), verify does not certify them; the planted pair still
# diverges (exit 1) with the planted kernel as the origin, since a divergence found is real.
# Once the samples are regenerated with end records: the deterministic pair exits 0 and verify
# certifies (the two lines marked "until the samples carry end records").
set -u
lockstep=$1 traces=$2
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

out=$("$lockstep" diff "$traces/cuda-det-full-1" "$traces/cuda-det-full-2")
rc=$?; [[ $rc -eq 2 ]] || fail "deterministic pair: exit $rc, expected 2"  # until the samples carry end records
grep -q 'INCOMPLETE' <<<"$out" || fail "deterministic pair: not INCOMPLETE: $out"
grep -q 'no end record' <<<"$out" || fail "deterministic pair: does not say why: $out"

out=$("$lockstep" diff "$traces/cuda-atomic-full-1" "$traces/cuda-atomic-full-2" --json)
rc=$?; [[ $rc -eq 1 ]] || fail "planted pair: exit $rc, expected 1"
grep -q '"classification": "origin"' <<<"$out" || fail "planted pair: no origin"
grep -q 'planted_atomic_sum_squares' <<<"$out" || fail "planted pair: origin is not the planted kernel"

err=$("$lockstep" verify "$traces/cuda-det-full-1" 2>&1 >/dev/null)
rc=$?; [[ $rc -eq 2 ]] || fail "verify of a sample trace: exit $rc, expected 2"  # until the samples carry end records
grep -q 'no end record.*readable prefix up to step' <<<"$err" || fail "verify: $err"

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
