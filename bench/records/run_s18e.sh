#!/usr/bin/env bash
# Session 18, call 5: the GPU suite of the submitted build (run_s18d.sh's) under compute-sanitizer
# memcheck (leak check full) and racecheck — the whole suite, not run under the tools since session 8
# (docs/sanitizers.md); initcheck not run (its known cuBLAS reports; no device time for a third
# tool). One pool of 15 jobs (bench/records/sanitize_suite.sh with a job list), the slow pairs split
# per test case as docs/sanitizers.md lists, TIGA_TEST_UNDER_SANITIZER=1. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" TIGA_TEST_UNDER_SANITIZER=1
o=$OUT/logs; mkdir -p $o/san
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
compute-sanitizer --version | tail -1
END=${END_S:-430}
SPLIT=" racecheck:test_charlm_f16 racecheck:test_attention racecheck:test_nonfinite racecheck:test_linear racecheck:test_graph memcheck:test_nonfinite memcheck:test_charlm_f16 "
ORDER="test_charlm_f16 test_attention test_nonfinite test_linear test_graph test_edge_attention test_fault_injection test_mha"
bins=$(find "$R/tests" -maxdepth 1 -type f -executable -name 'test_*' -printf '%f\n' | sort)
J=$o/san/jobs.in
for b in $ORDER $(echo "$bins" | grep -vxF -f <(echo $ORDER | tr ' ' '\n')); do
  echo "$bins" | grep -qx "$b" || continue
  for tool in racecheck memcheck; do
    case "$SPLIT" in
    *" $tool:$b "*)
      (cd "$R/tests" && "./$b" --list 2>/dev/null) |
        awk -v t="$tool" -v b="$b" '/^[^ ].*: [0-9]+ test/{s=$1; sub(":","",s)} /^(├|└)/{print t, b, s "/" $NF}' ;;
    *) echo "$tool $b" ;;
    esac
  done
done > $J
echo "jobs: $(wc -l < $J)"
JOBS=$J timeout $((END - SECONDS)) bash bench/records/sanitize_suite.sh $R $o/san 15 400 "" > $o/san.log 2>&1
echo "sanitize_suite rc=$? after ${SECONDS}s: $(wc -l < $o/san/jobs.txt) jobs listed, $(wc -l < $o/san/summary.txt) finished"
echo "== finished with rc != 0 or errors in the summary:"
grep -vE ' rc=0 ' $o/san/summary.txt | cut -c1-220
grep -E ' rc=0 ' $o/san/summary.txt | grep -E 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|Failing: [1-9]|Crashing: [1-9]' | cut -c1-220
echo "== not finished:"
while read -r tool b f; do
  grep -q "^$tool $b${f:+:$f} rc=" $o/san/summary.txt || echo "$tool $b${f:+:$f}"
done < $o/san/jobs.txt
echo "== clean (rc 0, 0 errors / hazards): $(grep -E ' rc=0 ' $o/san/summary.txt | grep -vcE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]')"
echo "== kernels of each error report:"
for log in $o/san/*.log; do
  n=$(grep -cE '^========= (Invalid|Race|Error|Program hit|Leaked)' $log)
  [ "$n" -gt 0 ] || continue
  echo "$(basename $log): $n reports, $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' $log)"
  grep -E '^========= (Invalid|Race|Leaked|Program hit|Error)' $log | sed 's/ at .*//' | sort | uniq -c | head -4
done 2>/dev/null | head -60
cp $o/san/summary.txt $o/summary.txt 2>/dev/null; pack
