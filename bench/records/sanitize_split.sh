#!/usr/bin/env bash
# One compute-sanitizer tool over the Criterion tests of some binaries, each test case its own
# job (for the binaries too slow to run whole under racecheck), several at once. A line per job
# "<tool> <binary>:<test> rc=<rc> <seconds>s <summary>", then a total.
#   bench/records/sanitize_split.sh BUILD_RUN_DIR LOGDIR TOOL PARALLEL JOB_TIMEOUT_S "test_a test_b" [EXTRA_TOOL_FLAGS]
set -uo pipefail
R=$1 L=$2 TOOL=$3 P=$4 T=$5 BINS=$6 EXTRA=${7:-}
mkdir -p "$L"
one() { # binary test
  local b=$1 t=$2 log="$L/${TOOL}_$1_${2//\//_}.log" s=$SECONDS extra=()
  [ "$TOOL" = memcheck ] && extra=(--leak-check full)
  (cd "$R/tests" && timeout "$T" compute-sanitizer --tool "$TOOL" "${extra[@]}" $EXTRA --error-exitcode 99 "./$b" --filter "$t" --jobs 1 > "$log" 2>&1)
  local rc=$?
  echo "$TOOL $b:$t rc=$rc $((SECONDS - s))s $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|Synthesis' "$log" | tr '\n' ' ' | cut -c1-180)$([ $rc -eq 124 ] && echo ' TIMEOUT')"
}
export -f one; export R L T TOOL EXTRA
for b in $BINS; do
  (cd "$R/tests" && "./$b" --list 2>/dev/null) | awk -v b="$b" '/^[^ ].*: [0-9]+ test/{s=$1; sub(":","",s)} /^(├|└)/{n=$NF; print b, s "/" n}'
done | xargs -P "$P" -L 1 bash -c 'one "$0" "$1"' | tee -a "$L/split_summary.txt"
echo "sanitize_split $TOOL: $(grep -c " rc=" "$L/split_summary.txt") jobs, $(grep -vc " rc=0 " "$L/split_summary.txt") not clean"
