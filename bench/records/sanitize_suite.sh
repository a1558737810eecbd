#!/usr/bin/env bash
# The whole GPU test suite under compute-sanitizer memcheck (leak check full), racecheck and
# initcheck in one pool of jobs (one GPU, 16 host cores): a job per (tool, test binary), except
# the (tool, binary) pairs named in SPLIT, which get a job per Criterion test case (binaries too
# slow to run whole under that tool). Jobs named first in ORDER start first. One log per job under
# LOGDIR, a line per job "<tool> <binary>[:<test>] rc=<rc> <seconds>s <summary>", then a total.
#   bench/records/sanitize_suite.sh BUILD_RUN_DIR LOGDIR PARALLEL JOB_TIMEOUT_S "tool:test_x ..." [ORDER]
# With JOBS=FILE in the environment the job list is FILE's lines ("tool binary [suite/test]")
# instead (a rerun of what an earlier call left). INIT_ARGS="..." in the environment: extra
# arguments of the initcheck jobs (e.g. "--show-backtrace no --print-limit 8").
set -uo pipefail
R=$1 L=$2 P=$3 T=$4 SPLIT=" $5 " ORDER=${6:-"test_charlm_f16 test_attention test_nonfinite test_linear test_graph test_edge_attention test_fault_injection test_mha"}
mkdir -p "$L"
job() { # tool binary [filter]
  local tool=$1 b=$2 f=${3:-} extra=() log
  log="$L/${tool}_${b}${f:+_${f//\//_}}.log"
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  [ "$tool" = initcheck ] && [ -n "${INIT_ARGS:-}" ] && read -r -a extra <<< "$INIT_ARGS"
  local s=$SECONDS
  (cd "$R/tests" && timeout "$T" compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 "./$b" ${f:+--filter "$f"} --jobs 1 > "$log" 2>&1)
  local rc=$? note=""
  if [ $rc -ne 0 ] && grep -q "terminated before first instrumented API call" "$log"; then
    (cd "$R/tests" && "./$b" ${f:+--filter "$f"} --jobs 1 >> "$log" 2>&1); rc=$?; note=" (no CUDA call: ran without the tool)"
  fi
  [ $rc -eq 124 ] && note=" TIMEOUT"
  echo "$tool $b${f:+:$f} rc=$rc $((SECONDS - s))s $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|Synthesis' "$log" | tr '\n' ' ' | cut -c1-200)$note"
}
export -f job; export R L T INIT_ARGS
bins=$(find "$R/tests" -maxdepth 1 -type f -executable -name 'test_*' -printf '%f\n' | sort | tr '\n' ' ')
first=""; rest=""
for o in $ORDER; do case " $bins " in *" $o "*) first="$first $o";; esac; done
for b in $bins; do case " $ORDER " in *" $b "*) ;; *) rest="$rest $b";; esac; done
{
  [ -n "${JOBS:-}" ] && { cat "$JOBS"; exit 0; }
  for b in $first $rest; do
    for tool in racecheck memcheck initcheck; do
      case "$SPLIT" in
      *" $tool:$b "*)
        (cd "$R/tests" && "./$b" --list 2>/dev/null) |
          awk -v t="$tool" -v b="$b" '/^[^ ].*: [0-9]+ test/{s=$1; sub(":","",s)} /^(├|└)/{print t, b, s "/" $NF}' ;;
      *) echo "$tool $b" ;;
      esac
    done
  done
} | tee "$L/jobs.txt" | xargs -P "$P" -L 1 bash -c 'job "$@"' _ | tee "$L/summary.txt"
echo "sanitize_suite: $(wc -l < "$L/summary.txt") jobs, $(grep -vc ' rc=0 ' "$L/summary.txt") with rc != 0"
