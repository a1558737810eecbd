#!/usr/bin/env bash
# Session 3, first call: the sm_90a (wgmma) attention kernels. Correctness against the float64
# reference (every check case; the f16 / bf16 D = 64 / 128 ones now run wgmma), a memcheck of two
# cases, then the speed of the three forward tile variants (--family 1..3).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}"
o=$OUT
B=build-gpu/bench/bench_attention
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 240 $B --check > $o/check1.log 2>&1; echo "check family1 rc=$?"; grep -E "FAIL|SUMMARY|status|error" $o/check1.log | head -40
grep -E " (f16|bf16) " $o/check1.log | grep -E "D=(64|128) Dv=(64|128)" | cut -c1-200 | head -24
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 $B --check "causal-q<k f16 D=128" > $o/mc.log 2>&1; echo "memcheck rc=$?"; tail -3 $o/mc.log
for f in 1 2 3; do timeout 100 $B --bench --family $f > $o/bench$f.log 2>&1; echo "bench family $f rc=$?"; tail -20 $o/bench$f.log; done
