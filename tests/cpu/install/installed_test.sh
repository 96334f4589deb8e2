#!/usr/bin/env bash
# An installed lockstep, from `cmake --install` into an empty prefix or from the .deb unpacked
# with `dpkg -x` into an empty folder (issue #33): the demo runs from there, `lockstep run` finds
# the installed shim (not the build tree's), the C header is in place, and the installed Python
# package diffs the sample traces.
#   installed_test.sh install BUILD_DIR SOURCE_DIR
#   installed_test.sh deb BUILD_DIR SOURCE_DIR
set -u
mode=$1 build=$2 source=$3
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

case $mode in
  install)
    prefix=$work/prefix
    cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
      fail "cmake --install: $(tail -5 "$work/install.log")"
    ;;
  deb)
    (cd "$build" && cpack -G DEB -B "$work/pkg") >"$work/cpack.log" 2>&1 ||
      fail "cpack: $(tail -5 "$work/cpack.log")"
    debs=("$work"/pkg/lockstep_*.deb)
    [[ -f ${debs[0]} ]] || fail "cpack made no lockstep_*.deb: $(ls "$work/pkg")"
    depends=$(dpkg-deb -f "${debs[0]}" Depends)
    for dep in libfmt libc6 libstdc++6 python3; do
      grep -q "$dep" <<<"$depends" || fail ".deb Depends lacks $dep: $depends"
    done
    mkdir "$work/root"
    dpkg -x "${debs[0]}" "$work/root" || fail "dpkg -x ${debs[0]}"
    prefix=$work/root/usr
    ;;
  *) fail "unknown mode $mode" ;;
esac

lockstep=$prefix/bin/lockstep
for f in bin/lockstep lib/liblockstep.so include/lockstep/lockstep.h \
         lib/python3/dist-packages/lockstep/__init__.py; do
  [[ -f $prefix/$f ]] || fail "$mode: $f is not installed"
done
ls "$prefix"/lib/python3/dist-packages/lockstep/_core*.so >/dev/null 2>&1 ||
  fail "$mode: the extension lockstep._core is not installed"

# The demo, with the installed binary.
out=$(LOCKSTEP="$lockstep" "$source/scripts/demo.sh" 2>&1) || fail "$mode: demo.sh: $out"
grep -q IDENTICAL <<<"$out" || fail "$mode: the demo's deterministic pair is not IDENTICAL: $out"
grep -q planted_atomic_sum_squares <<<"$out" || fail "$mode: the demo names no planted kernel"

# `lockstep run` preloads the installed shim (../lib next to the binary), whatever the build
# tree holds.
preload=$(cd "$work" && env -u LOCKSTEP_LIB "$lockstep" run -o "$work/trace" -- \
  /bin/sh -c 'echo "$LD_PRELOAD"' 2>"$work/run.err") ||
  fail "$mode: lockstep run -- /bin/sh: $(cat "$work/run.err")"
[[ ${preload%%:*} == "$prefix/lib/liblockstep.so" ]] ||
  fail "$mode: lockstep run preloaded '${preload%%:*}', not $prefix/lib/liblockstep.so"
(cd "$work" && env -u LOCKSTEP_LIB "$lockstep" run -o "$work/trace-true" -- /bin/true) \
  >"$work/true.out" 2>&1 || fail "$mode: lockstep run -- /bin/true: $(cat "$work/true.out")"

# The installed Python package, on Debian's path layout.
python3=${PYTHON3:-python3}
verdict=$(cd "$work" && PYTHONPATH="$prefix/lib/python3/dist-packages" PYTHONDONTWRITEBYTECODE=1 \
  "$python3" -c '
import sys, lockstep
assert lockstep.__file__.startswith(sys.argv[1]), lockstep.__file__
print(lockstep.diff(sys.argv[2], sys.argv[3]).culprit.name)' \
  "$prefix" "$source/examples/traces/cuda-atomic-full-1" \
  "$source/examples/traces/cuda-atomic-full-2" 2>&1) || fail "$mode: python: $verdict"
grep -q planted_atomic_sum_squares <<<"$verdict" || fail "$mode: python's culprit: $verdict"
echo "PASS: $mode"
