#!/usr/bin/env bash
# Session 3, sixth call: the backward's dQ staged as one 64 x D block per step (swizzled workspace layout)
# and added by ONE bulk reduction (cp.reduce.async.bulk .add.f32) per CTA step. Check, sanitizers, bench
# families 1 and 3, ncu on the D = 64 backward.
set -uo pipefail
cd "$(dirname "$0")/../.."
o=$OUT
B=build-bench/bench_attention
timeout 240 $B --check > $o/check.log 2>&1; echo "check rc=$?"; grep -E "FAIL|SUMMARY|status|error" $o/check.log | head -40
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 $B --check "varlen-causal-q!=k f16 D=64" > $o/mc.log 2>&1; echo "memcheck rc=$?"; tail -2 $o/mc.log
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 $B --check "dense-513 bf16 D=128" > $o/mc2.log 2>&1; echo "memcheck2 rc=$?"; tail -2 $o/mc2.log
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 99 $B --check "mask-random-b2 f16 D=64" > $o/rc.log 2>&1; echo "racecheck rc=$?"; tail -2 $o/rc.log
for f in 1 3; do timeout 100 $B --bench --family $f > $o/bench$f.log 2>&1; echo "bench family $f rc=$?"; tail -20 $o/bench$f.log; done
timeout 120 ncu --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis -k regex:fa_bwd_sm90 -c 1 $B --bench "dense f16 D=64 N=4096" > $o/ncu.log 2>&1; echo "ncu rc=$?"
grep -E "fa_|Duration|Throughput|Stall|Issue Slots|Pipe|Warp Cycles|Eligible|Active Warps" $o/ncu.log | head -40
