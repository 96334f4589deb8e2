#!/usr/bin/env bash
# The real traces in examples/traces (made by the shim on the H200): the deterministic pair is
# identical (exit 0), the planted pair diverges (exit 1) with the planted kernel as the origin.
set -u
lockstep=$1 traces=$2
fail() { echo "FAIL: $*"; exit 1; }
"$lockstep" diff "$traces/cuda-det-full-1" "$traces/cuda-det-full-2" >/dev/null
rc=$?; [[ $rc -eq 0 ]] || fail "deterministic pair: exit $rc, expected 0"
out=$("$lockstep" diff "$traces/cuda-atomic-full-1" "$traces/cuda-atomic-full-2" --json)
rc=$?; [[ $rc -eq 1 ]] || fail "planted pair: exit $rc, expected 1"
grep -q '"classification": "origin"' <<<"$out" || fail "planted pair: no origin"
grep -q 'planted_atomic_sum_squares' <<<"$out" || fail "planted pair: origin is not the planted kernel"
"$lockstep" verify "$traces/cuda-det-full-1" >/dev/null || fail "verify of a sample trace failed"
echo "PASS: sample traces"
