#!/usr/bin/env bash
# Session 8, call 5: the same four initcheck runs as run_s8d.sh with every report printed (no
# backtraces), summarised on the device: per binary, the reading kernel (or host copy) of each
# report. The full logs are not kept.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" TIGA_TEST_UNDER_SANITIZER=1
L=/tmp/s8e; mkdir -p $L
for t in test_linear test_mha test_edge_attention test_charlm_f16; do
  (cd $R/tests && timeout ${T_S:-120} compute-sanitizer --tool initcheck --show-backtrace no --print-limit 100000000 --error-exitcode 99 ./$t --jobs 1 > $L/$t.log 2>&1
   echo "initcheck $t rc=$? $(grep -hE 'Synthesis|ERROR SUMMARY' $L/$t.log | tr '\n' ' ' | cut -c1-160) dropped-record warnings: $(grep -c 'records have been dropped' $L/$t.log)"
   { grep -E '^=========     at ' $L/$t.log | sed -E 's/\(.*//; s/^=========     at //; s/\+0x.*//'
     grep -E 'on access by cudaMemcpy' $L/$t.log | sed -E 's/.*on access by/host: cudaMemcpy/'; } | sort | uniq -c | sed "s/^/  $t: /") &
done
wait
