#!/usr/bin/env bash
# Session 4, call 7 (build-ab): A/B of the sm_90a backward's epilogue — a: c04f64b; b: the old
# dk / dv read before the last dQ product, and only the read of the last dQ stage awaited before
# the CTA ends (cp.async.bulk.wait_group.read) — beside SDPA FLASH on the N = 1024 shapes.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
o=$OUT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 100 build-ab/bench_b --check > $o/check.log 2>&1; echo "check b rc=$?"; grep -E "FAIL|SUMMARY" $o/check.log | head
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 99 build-ab/bench_b --check "f16 D=64" > $o/race.log 2>&1; echo "racecheck b rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race.log | tail -1)"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 build-ab/bench_b --check "D=128" > $o/mc.log 2>&1; echo "memcheck b rc=$? $(grep -h 'ERROR SUMMARY' $o/mc.log | tail -1)"
for r in 1 2; do for x in a b; do echo "== $x"; for c in "N=1024" "f16 D=64 N=4096" "f16 D=128 N=16384" "mask50 f16 D=64"; do timeout 60 build-ab/bench_$x --bench "$c" 2>&1 | grep RESULT | sed 's/impl=tiga //'; done; done; done
timeout 200 python3 bench/attention_torch.py --no-flex "N=1024" 2>&1 | grep RESULT | grep -v "impl=eff"
