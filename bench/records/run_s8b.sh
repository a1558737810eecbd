#!/usr/bin/env bash
# Session 8, call 2: the whole GPU suite (run_s8a.sh's build) under compute-sanitizer memcheck
# (leak check full), racecheck and initcheck, one pool of jobs (bench/records/sanitize_suite.sh),
# the binaries too slow to run whole under a tool split into one job per test case. Nothing else
# runs. Prints the jobs that are not clean, the error kinds and kernels of each such log, and the
# jobs that did not finish. Logs under $OUT/logs.tgz. carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}"
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
compute-sanitizer --version | tail -1
END=${END_S:-545}
SPLIT="racecheck:test_charlm_f16 racecheck:test_attention racecheck:test_nonfinite racecheck:test_linear racecheck:test_graph
 memcheck:test_nonfinite initcheck:test_nonfinite memcheck:test_charlm_f16 initcheck:test_charlm_f16"
timeout $((END - SECONDS)) bash bench/records/sanitize_suite.sh $R $o/san 15 470 "$(echo $SPLIT)" > $o/san.log 2>&1
echo "sanitize_suite rc=$? after ${SECONDS}s: $(wc -l < $o/san/jobs.txt) jobs listed, $(wc -l < $o/san/summary.txt) finished"
echo "== finished with rc != 0 or errors in the summary:"
grep -vE ' rc=0 ' $o/san/summary.txt | cut -c1-220
grep -E ' rc=0 ' $o/san/summary.txt | grep -E 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|Failing: [1-9]|Crashing: [1-9]' | cut -c1-220
echo "== not finished:"
while read -r tool b f; do
  grep -q "^$tool $b${f:+:$f} rc=" $o/san/summary.txt || echo "$tool $b${f:+:$f}"
done < $o/san/jobs.txt
echo "== kernels of each error report (log: count kernel):"
for log in $o/san/*.log; do
  n=$(grep -cE '^========= (Uninitialized|Invalid|Race|Error|Program hit|Leaked)' $log)
  [ "$n" -gt 0 ] || continue
  echo "$(basename $log): $n reports, $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' $log)"
  grep -E '^========= (Uninitialized|Invalid|Race|Leaked|Program hit)' $log | sed 's/ at .*//' | sort | uniq -c | head -4
  grep -E '^=========     at ' $log | sed -E 's/\(.*//; s/^=========     at //; s/\+0x.*//' | sort | uniq -c | sort -rn | head -4
  grep -E 'Host Frame: [a-z_0-9]+ \[' $log | awk '{print $4}' | grep -vE '^(cuLaunchKernel|cudaLaunchKernel|criterion|_start|__libc)' | sort | uniq -c | sort -rn | head -6
done 2>/dev/null | head -150
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o
