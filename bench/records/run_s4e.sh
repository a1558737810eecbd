#!/usr/bin/env bash
# Session 4, call 5 (build-ab: two bench binaries): A/B of the mask walk's state in registers (a,
# the code of run_s4d.sh) against shared memory (b, which also gives the D = 128 backward the walk).
set -uo pipefail
cd "$(dirname "$0")/../.."
o=$OUT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 100 build-ab/bench_b --check > $o/check.log 2>&1; echo "check b rc=$?"; grep -E "FAIL|SUMMARY" $o/check.log | head
for f in 6 7 8; do timeout 60 build-ab/bench_b --family $f --check mask > $o/check$f.log 2>&1; echo "check b family $f rc=$?"; grep -E "FAIL|SUMMARY" $o/check$f.log | head -5; done
for f in 1 8; do timeout 100 compute-sanitizer --tool racecheck --error-exitcode 99 build-ab/bench_b --family $f --check mask > $o/race$f.log 2>&1; echo "racecheck b family $f rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race$f.log | tail -1)"; done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 build-ab/bench_b --check mask > $o/mc.log 2>&1; echo "memcheck b rc=$? $(grep -h 'ERROR SUMMARY' $o/mc.log | tail -1)"
for r in 1 2; do for x in a b; do echo "== $x"; timeout 60 build-ab/bench_$x --bench mask 2>&1 | grep RESULT | sed 's/impl=tiga //'; done; done
