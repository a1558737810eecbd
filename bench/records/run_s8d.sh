#!/usr/bin/env bash
# Session 8, call 4: initcheck on the four binaries whose reports (reads of cuBLAS half-precision
# GEMM outputs) made them time out in run_s8b.sh / run_s8c.sh, with the per-report cost cut
# (--show-backtrace no, --print-limit 8), in parallel; test_charlm_f16 under
# TIGA_TEST_UNDER_SANITIZER=1. Prints each job's summary and the kernels of the printed reports.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" TIGA_TEST_UNDER_SANITIZER=1
o=$OUT/logs; mkdir -p $o
T=${T_S:-230}
for t in test_linear test_mha test_edge_attention test_charlm_f16; do
  (cd $R/tests && s=$SECONDS && timeout $T compute-sanitizer --tool initcheck --show-backtrace no --print-limit 8 --error-exitcode 99 ./$t --jobs 1 > $o/init_$t.log 2>&1
   echo "initcheck $t rc=$? $((SECONDS - s))s $(grep -hE 'Synthesis|ERROR SUMMARY' $o/init_$t.log | tr '\n' ' ' | cut -c1-200)"
   grep -E '^=========     at ' $o/init_$t.log | sed -E 's/\(.*//; s/^=========     at //; s/\+0x.*//' | sort | uniq -c | sed "s/^/  $t: /") &
done
wait
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o
