#!/usr/bin/env bash
# `lockstep show` and `stats` on the real sample traces (examples/traces) against the golden files
# in tests/cpu/tools/golden/: what people read must change only on purpose.
#   golden_test.sh LOCKSTEP SOURCE_DIR
# After an intended change of the output, regenerate the files and review their diff:
#   LOCKSTEP_UPDATE_GOLDEN=1 ctest --test-dir build -R tools.golden_outputs
set -uo pipefail
lockstep=$1
cd "$2" || exit 2  # paths in the output are relative to the source tree, the same everywhere
golden=tests/cpu/tools/golden
cases=(
  "show-atomic-step3|show examples/traces/cuda-atomic-full-1 --step 3"
  "show-det-first12|show examples/traces/cuda-det-full-1 --limit 12"
  "show-det-warnings|show examples/traces/cuda-det-full-1 --grep ^(rank|kernels)"
  "stats-atomic|stats examples/traces/cuda-atomic-full-1"
  "stats-det|stats examples/traces/cuda-det-full-1 --top 5"
)
failed=0
for case in "${cases[@]}"; do
  name=${case%%|*}
  read -r -a args <<<"${case#*|}"
  actual=$("$lockstep" "${args[@]}" 2>&1)
  rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "FAIL $name: lockstep ${args[*]} exited $rc: $actual"
    failed=1
    continue
  fi
  if [[ ${LOCKSTEP_UPDATE_GOLDEN:-0} == 1 ]]; then
    printf '%s\n' "$actual" >"$golden/$name.txt"
    echo "updated $golden/$name.txt"
  elif ! diff -u "$golden/$name.txt" <(printf '%s\n' "$actual"); then
    echo "FAIL $name: lockstep ${args[*]} differs from $golden/$name.txt (above; LOCKSTEP_UPDATE_GOLDEN=1 regenerates)"
    failed=1
  else
    echo "ok   $name"
  fi
done
exit $failed
