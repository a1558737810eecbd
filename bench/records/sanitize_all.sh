#!/usr/bin/env bash
# The whole GPU test suite under compute-sanitizer memcheck (leak check full), racecheck and
# initcheck, several test binaries at once (one GPU, 16 host cores). One log per (tool, test) under
# $2, a line per job: "<tool> <test> rc=<rc> <seconds>s <summary>", then a total.
#   bench/records/sanitize_all.sh BUILD_RUN_DIR LOGDIR [PARALLEL] [JOB_TIMEOUT_S] [TOOLS]
set -uo pipefail
R=$1 L=$2 P=${3:-12} T=${4:-400} TOOLS=${5:-"racecheck memcheck initcheck"}
mkdir -p "$L"
job() { # tool test
  local tool=$1 t=$2 log="$L/$1_$(basename "$2").log" extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  local s=$SECONDS
  (cd "$(dirname "$t")" && timeout "$T" compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 "$t" --jobs 1 > "$log" 2>&1)
  local rc=$? note=""
  if [ $rc -ne 0 ] && grep -q "terminated before first instrumented API call" "$log"; then
    (cd "$(dirname "$t")" && "$t" --jobs 1 >> "$log" 2>&1); rc=$?; note=" (no CUDA call: ran without the tool)"
  fi
  [ $rc -eq 124 ] && note=" TIMEOUT"
  echo "$tool $(basename "$t") rc=$rc $((SECONDS - s))s $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|Synthesis|Tested' "$log" | tr '\n' ' ' | cut -c1-200)$note"
}
export -f job; export L T
tests=$(find "$R/tests" -maxdepth 1 -type f -executable -name 'test_*' | sort)
# the long ones first
order="test_attention test_mha test_edge_attention test_graph test_charlm test_charlm_f16 test_linear test_fault_injection"
{
  for tool in $TOOLS; do
    for o in $order; do [ -x "$R/tests/$o" ] && echo "$tool $R/tests/$o"; done
    for t in $tests; do case " $order " in *" $(basename $t) "*) ;; *) echo "$tool $t";; esac; done
  done
} | xargs -P "$P" -L 1 bash -c 'job "$0" "$1"' | tee "$L/summary.txt"
bad=$(grep -vc " rc=0 " "$L/summary.txt")
echo "sanitize_all: $(wc -l < "$L/summary.txt") jobs, $bad not clean"
