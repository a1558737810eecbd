#!/usr/bin/env bash
# Session 13, call 4 (experiment through a temporary switch): cp.async-pipelined gathers in the
# hidden-64 slice kernels (FQ 8, H 1 / 4). TIGA_EA_PIPE="f,d,s" = stages per pass (0 none, 2, 3).
# The build also holds the H 1 register caps (dst 3, src 4 blocks a SM) by default.
# test_edge_attention with PIPE 3,3,3; memcheck and racecheck on its CUDA tests (3,3,3);
# --check (3,3,3); bench_edge_ops hid-64 configs per setting (the baseline twice); the point-cloud step at
# 400k per setting. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-240}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
for p in 3,3,3; do
(cd $R/tests && TIGA_EA_PIPE=$p timeout $(tl 100) ./test_edge_attention --jobs 4 > $o/test_ea_$p.log 2>&1; echo "test_edge_attention (PIPE $p) rc=$? $(grep -h Synthesis $o/test_ea_$p.log | tail -1)")
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/test_ea_$p.log | head -20
done
(cd $R/tests
for tool in memcheck racecheck; do
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  TIGA_EA_PIPE=3,3,3 timeout $(tl 100) compute-sanitizer --tool $tool $extra --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/${tool}_ea.log 2>&1
  echo "$tool test_edge_attention (CUDA tests, PIPE 3,3,3) rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/${tool}_ea.log | tail -1) $(grep -h Synthesis $o/${tool}_ea.log | tail -1)"
done)
D=/tmp/s13d; mkdir -p $D
timeout $(tl 120) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k --no-compile --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch (eager, dumps) rc=$?"
B=$R/bench/bench_edge_ops
TIGA_EA_PIPE=3,3,3 timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check (PIPE 3,3,3) rc=$? $(tail -1 $o/ea_check.log)"
echo "elapsed ${SECONDS}s"; pack
run() { TIGA_EA_PIPE=$1 timeout $(tl 30) $B --graph $D/radius_$2.bin --providers fused --only $3 2>&1 | grep -v '^{' | grep fused | awk '{print $(NF-1)}'; }
for round in 1; do for m in 0,0,0 2,2,2 3,3,3 3,0,0 0,3,0 0,0,3 0,0,0; do
  echo "round $round pipe $m: 100k H1 $(run $m 100k 1) H4 $(run $m 100k 3) | 400k H1 $(run $m 400k 1) H4 $(run $m 400k 3)"
done; done | tee $o/pipe.log
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for round in 1; do for m in 0,0,0 3,3,3 2,2,2; do
  TIGA_EA_PIPE=$m timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc.log 2>&1; echo "point cloud 400k round $round pipe $m rc=$? $(tail -1 $o/pc.log | cut -c1-50)"
done; done
echo "elapsed ${SECONDS}s"; pack
