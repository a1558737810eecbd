#!/usr/bin/env bash
# Session 4, call 2 (build-gpu): the whole suite, the float64 check (default and every mask
# variant), racecheck on the mask walk, the mask sweep (families 1, 6, 7, 8), then the whole suite
# under compute-sanitizer memcheck (not run in session 3).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
B=build-gpu/bench/bench_attention
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 200 build-gpu/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$?"; tail -1 $o/tests.log; grep -E "FAIL" $o/tests.log | head
timeout 100 $B --check > $o/check.log 2>&1; echo "check rc=$?"; grep -E "FAIL|SUMMARY" $o/check.log | head
for f in 6 7 8; do timeout 60 $B --family $f --check mask > $o/check$f.log 2>&1; echo "check family $f rc=$?"; grep -E "FAIL|SUMMARY" $o/check$f.log | head -5; done
for f in 1 7; do timeout 150 compute-sanitizer --tool racecheck --error-exitcode 99 $B --family $f --check mask > $o/race$f.log 2>&1; echo "racecheck family $f rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race$f.log | tail -1)"; done
for f in 1 6 7 8 1; do echo "== family $f"; timeout 60 $B --family $f --bench mask 2>&1 | grep RESULT | sed 's/impl=tiga //'; done
timeout 240 build-gpu/run-tests.sh --sanitize > $o/sanitize.log 2>&1; echo "sanitize rc=$?"; tail -1 $o/sanitize.log; grep -E "FAIL|ERROR SUMMARY: [1-9]" $o/sanitize.log | head
