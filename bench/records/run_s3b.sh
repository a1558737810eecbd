#!/usr/bin/env bash
# Session 3, second call: the pipelined wgmma backward (dQ split by columns, atomics overlapping
# the next step's S and dP). Check every case, memcheck + racecheck two, bench the three families.
set -uo pipefail
cd "$(dirname "$0")/../.."
o=$OUT
B=build-bench/bench_attention
timeout 240 $B --check > $o/check.log 2>&1; echo "check rc=$?"; grep -E "FAIL|SUMMARY|status|error" $o/check.log | head -40
grep -E " (f16|bf16) " $o/check.log | grep -E "D=(64|128) Dv=(64|128)" | cut -c1-200 | head -8
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 $B --check "mask-blocks-shared f16 D=64" > $o/mc.log 2>&1; echo "memcheck rc=$?"; tail -2 $o/mc.log
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 99 $B --check "causal-q<k bf16 D=128" > $o/rc.log 2>&1; echo "racecheck rc=$?"; tail -2 $o/rc.log
for f in 1 2 3; do timeout 100 $B --bench --family $f > $o/bench$f.log 2>&1; echo "bench family $f rc=$?"; tail -20 $o/bench$f.log; done
