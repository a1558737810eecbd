#!/usr/bin/env bash
# Session 3, tenth call: the forward's per-warpgroup tile class computed while S is in flight (for
# masks it reads tile summaries), and a non-pipelined one-warpgroup variant for masks (family 4,
# with the next-tile scan after S is issued). Check; bench family 1; mask under families 2 and 4.
set -uo pipefail
cd "$(dirname "$0")/../.."
o=$OUT
B=build-bench/bench_attention
timeout 240 $B --check > $o/check.log 2>&1; echo "check rc=$?"; grep -E "FAIL|SUMMARY" $o/check.log | head -20
timeout 100 $B --bench > $o/bench1.log 2>&1; echo "bench family 1 rc=$?"; tail -20 $o/bench1.log
for f in 2 4; do timeout 60 $B --bench mask --family $f > $o/mask$f.log 2>&1; echo "mask family $f rc=$?"; tail -1 $o/mask$f.log; done
