#!/usr/bin/env bash
# Session 3, eighth call: vectorised delta (+ dQ accumulator zeroing) and dq finish; one-warpgroup
# backward CTAs for boolean masks (D = 64). Check every case, bench family 1 (default) and 5 (the
# one-warpgroup backward for every D = 64 case).
set -uo pipefail
cd "$(dirname "$0")/../.."
o=$OUT
B=build-bench/bench_attention
timeout 240 $B --check > $o/check.log 2>&1; echo "check rc=$?"; grep -E "FAIL|SUMMARY|status|error" $o/check.log | head -20
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 $B --check "mask-blocks-shared bf16 D=64" > $o/mc.log 2>&1; echo "memcheck rc=$?"; tail -1 $o/mc.log
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 99 $B --check "mask-random-b2 f16 D=64" > $o/rc.log 2>&1; echo "racecheck rc=$?"; tail -1 $o/rc.log
for f in 1 5; do timeout 100 $B --bench --family $f > $o/bench$f.log 2>&1; echo "bench family $f rc=$?"; tail -20 $o/bench$f.log; done
