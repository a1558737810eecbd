#!/usr/bin/env bash
# Session 7, call 3: the packed edge-attention kernels (a warp per chunk of up to 16 segments, the
# score phase on 32 edges across segment boundaries) through their harness only — the CUDA build
# with them (libtiga 73 MB) and the harness (30 MB) do not both fit the 64 MiB carry, so this call
# takes bench_edge_attention alone (it compiles the same kernel files): the float64 check with the
# rows per chunk the check graphs take and with 16-row chunks (what the 100k / 400k graphs take),
# the f32 timings old (warp per row) beside new, alone on the GPU; then compute-sanitizer memcheck,
# racecheck and initcheck on the check, all at once, each bounded by the call's deadline.
# Carry: gpu-carry-ea/ea.tar.xz (build-gpu-run/bench/bench_edge_attention). Logs under $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry-ea/ea.tar.xz || exit 1
B=$PWD/build-gpu-run/bench/bench_edge_attention
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-360}
tl() { local l=$((END - 25 - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 3 ] && l=1; echo $l; }
(timeout $(tl 75) $B --check > $o/ea_check.log 2>&1; echo "bench_edge_attention --check rc=$? $(grep -c FAIL $o/ea_check.log) FAIL lines; $(tail -1 $o/ea_check.log)") &
(TIGA_EA_ROWS=16 timeout $(tl 75) $B --check > $o/ea_check16.log 2>&1; echo "TIGA_EA_ROWS=16 bench_edge_attention --check rc=$? $(grep -c FAIL $o/ea_check16.log) FAIL lines; $(tail -1 $o/ea_check16.log)") &
wait
grep -h FAIL $o/ea_check.log $o/ea_check16.log | head -8
echo "elapsed ${SECONDS}s"
timeout $(tl 100) $B --bench --compare --only f32 > $o/ea_bench.log 2>&1; echo "bench_edge_attention --bench --compare --only f32 rc=$?"; tail -21 $o/ea_bench.log
echo "elapsed ${SECONDS}s"
san() { # name env tool
  local n=$1 e=$2 tool=$3 extra=(); [ $tool = memcheck ] && extra=(--leak-check full)
  env $e timeout $(tl 400) compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 99 $B --check > $o/$n.log 2>&1
  echo "$n rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/$n.log | tail -1) $(grep -c FAIL $o/$n.log) FAIL lines; $(grep -v '^=' $o/$n.log | tail -1 | cut -c1-100)"
}
san race16 TIGA_EA_ROWS=16 racecheck &
san race TIGA_EA_ROWS=0 racecheck &
san mem16 TIGA_EA_ROWS=16 memcheck &
san mem TIGA_EA_ROWS=0 memcheck &
san init16 TIGA_EA_ROWS=16 initcheck &
wait
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o
