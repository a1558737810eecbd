#!/usr/bin/env bash
# Session 4, call 3 (build-gpu, final code): the whole suite, memcheck of the CUDA attention tests
# (the new coarse / fine mask cases included), the float64 check (default; the fine and coarse
# mask shapes forced), racecheck on the mask cases, and the mask sweep.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
B=build-gpu/bench/bench_attention
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 200 build-gpu/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$?"; tail -1 $o/tests.log; grep -E "FAIL" $o/tests.log | head
(cd build-gpu/tests && timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./test_attention --jobs 1 --filter 'attention_cuda/*' > $o/mc_attn.log 2>&1; echo "memcheck attention_cuda rc=$? $(grep -h 'ERROR SUMMARY' $o/mc_attn.log | tail -1)"; grep Synthesis $o/mc_attn.log)
timeout 100 $B --check > $o/check.log 2>&1; echo "check rc=$?"; grep -E "FAIL|SUMMARY" $o/check.log | head
for f in 6 7 8; do timeout 60 $B --family $f --check mask > $o/check$f.log 2>&1; echo "check family $f rc=$?"; grep -E "FAIL|SUMMARY" $o/check$f.log | head -5; done
for f in 1 8; do timeout 100 compute-sanitizer --tool racecheck --error-exitcode 99 $B --family $f --check mask > $o/race$f.log 2>&1; echo "racecheck family $f rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race$f.log | tail -1)"; done
for f in 1 6 7 8; do echo "== family $f"; timeout 60 $B --family $f --bench mask 2>&1 | grep RESULT | sed 's/impl=tiga //'; done
