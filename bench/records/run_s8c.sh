#!/usr/bin/env bash
# Session 8, call 3: what run_s8b.sh left of the whole-suite sanitizer record, on the same library
# (tests rebuilt: test_nonfinite's many-buffer walks and test_charlm_f16's training run a subset
# under TIGA_TEST_UNDER_SANITIZER=1, which every job here sets): the jobs it did not finish or that
# hit a timeout, and the three tools on the binaries it never reached. First the three changed test
# binaries plainly. Logs under $OUT/logs.tgz. carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}"
o=$OUT/logs; mkdir -p $o/san
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-540}
for t in test_nonfinite test_charlm_f16 test_nonfinite_kernels; do
  (cd $R/tests && timeout 120 ./$t --jobs 4 > $o/plain_$t.log 2>&1; echo "plain $t rc=$? $(grep -h Synthesis $o/plain_$t.log)")
done
export TIGA_TEST_UNDER_SANITIZER=1
J=$o/san/jobs.in
for tool in racecheck memcheck initcheck; do
  for f in anomaly/cuda_many_buffers_batched anomaly/cuda_many_buffers_one_per_launch; do echo "$tool test_nonfinite $f"; done
done > $J
for tool in racecheck initcheck; do
  for f in charlm_f16/loss_falls_with_loss_scaling charlm_f16/overflowing_scale_backs_off_and_skips; do echo "$tool test_charlm_f16 $f"; done
done >> $J
echo "initcheck test_linear" >> $J; echo "initcheck test_mha" >> $J
for b in test_elementwise test_comm test_optim test_nonfinite_kernels test_layernorm test_lifetime test_loss test_providers \
         test_radius test_reduce test_relation test_reliability test_shape test_softmax test_tape test_zerocopy; do
  for tool in racecheck memcheck initcheck; do echo "$tool $b"; done
done >> $J
JOBS=$J timeout $((END - SECONDS)) bash bench/records/sanitize_suite.sh $R $o/san 15 420 "" > $o/san.log 2>&1
echo "sanitize_suite rc=$? after ${SECONDS}s: $(wc -l < $o/san/jobs.txt) jobs listed, $(wc -l < $o/san/summary.txt) finished"
echo "== finished with rc != 0 or errors in the summary:"
grep -vE ' rc=0 ' $o/san/summary.txt | cut -c1-220
grep -E ' rc=0 ' $o/san/summary.txt | grep -E 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|Failing: [1-9]|Crashing: [1-9]' | cut -c1-220
echo "== not finished:"
while read -r tool b f; do
  grep -q "^$tool $b${f:+:$f} rc=" $o/san/summary.txt || echo "$tool $b${f:+:$f}"
done < $o/san/jobs.txt
echo "== error reports (log: count kernel / host frames):"
for log in $o/san/*.log; do
  n=$(grep -cE '^========= (Uninitialized|Invalid|Race|Program hit|Leaked)' $log)
  [ "$n" -gt 0 ] || continue
  echo "$(basename $log): $n reports, $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' $log)"
  grep -E '^========= (Uninitialized|Invalid|Race|Leaked|Program hit)' $log | sed 's/ at .*//' | sort | uniq -c | head -4
  grep -E '^=========     at ' $log | sed -E 's/\(.*//; s/^=========     at //; s/\+0x.*//' | sort | uniq -c | sort -rn | head -4
  grep -E 'Host Frame: [a-z_0-9]+ \[' $log | awk '{print $4}' | grep -vE '^(cuLaunchKernel|cudaLaunchKernel|criterion|_start|__libc)' | sort | uniq -c | sort -rn | head -6
done 2>/dev/null | head -120
echo "== all finished jobs:"; sort $o/san/summary.txt | awk '{print $1, $2, $3, $4}'
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o
