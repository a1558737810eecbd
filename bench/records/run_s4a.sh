#!/usr/bin/env bash
# Session 4, call 1 (build-bench only): the mask walk (Sm90Walk) and mask tile shapes.
# Correctness of every variant on the mask check cases, then the mask benchmark (50 % and 100 %
# of blocks) per variant, the dense D = 64 N = 4096 reference, and ncu on the mask backward.
set -uo pipefail
cd "$(dirname "$0")/../.."
o=$OUT
B=build-bench/bench_attention
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 150 $B --check > $o/check.log 2>&1; echo "check rc=$?"; grep -E "FAIL|SUMMARY" $o/check.log | head
for f in 6 7 8; do timeout 60 $B --family $f --check mask > $o/check$f.log 2>&1; echo "check family $f rc=$?"; grep -E "FAIL|SUMMARY" $o/check$f.log | head -5; done
for f in 1 6 7 8 1; do echo "== family $f"; timeout 60 $B --family $f --bench mask 2>&1 | grep RESULT; done
timeout 60 $B --bench "f16 D=64 N=4096" 2>&1 | grep RESULT
for f in 1 6 8; do
timeout 120 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats -k regex:fa_bwd_sm90 -c 1 $B --family $f --bench "mask50" > $o/ncu$f.log 2>&1; echo "ncu family $f rc=$?"
grep -E "fa_|Duration|Throughput|Stall|L2 Hit|Mem Busy|Max Bandwidth|Warp Cycles|Eligible|Active Warps" $o/ncu$f.log | head -40
done
