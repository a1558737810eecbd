#!/usr/bin/env bash
# Session 6, call 5: after the backward rework of the fused edge-MLP attention: its harness (float64
# check, kernel timings); edge-MLP attention and the point-cloud step beside PyTorch (eager,
# torch.compile) on the same graphs; memcheck and racecheck on the edge-attention tests.
# Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
D=$OUT/ea
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-570}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
timeout $(tl 70) $R/bench/bench_edge_attention --check > $o/ea_check.log 2>&1; echo "bench_edge_attention --check rc=$? $(grep -c FAIL $o/ea_check.log) FAIL lines"
grep FAIL $o/ea_check.log | head -5; tail -1 $o/ea_check.log
timeout $(tl 60) $R/bench/bench_edge_attention --bench > $o/ea_bench.log 2>&1; echo "bench_edge_attention --bench rc=$?"; tail -19 $o/ea_bench.log
echo "elapsed ${SECONDS}s"
timeout $(tl 100) python3 bench/edge_attention_torch.py --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; grep -E "^\|" $o/ea_torch.log
for s in 100k 400k; do
  timeout $(tl 40) $R/bench/bench_edge_ops --graph $D/radius_$s.bin > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | tail -9
done
timeout $(tl 30) $R/bench/bench_edge_ops --check $D > $o/ea_ops_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_ops_check.log)"
echo "elapsed ${SECONDS}s"
timeout $(tl 90) python3 bench/pointcloud_torch.py --sizes 400k > $o/pc_torch.log 2>&1; echo "pointcloud_torch rc=$?"; grep -E "^\|" $o/pc_torch.log
timeout $(tl 40) $R/examples/train_pointcloud --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc_fused.log 2>&1; echo "train_pointcloud 400k fused rc=$?"; tail -1 $o/pc_fused.log
echo "elapsed ${SECONDS}s"
for tool in memcheck racecheck; do
  (cd $R/tests && timeout $(tl 60) compute-sanitizer --tool $tool --error-exitcode 99 ./test_edge_attention --jobs 1 > $o/${tool}_ea.log 2>&1
   echo "$tool test_edge_attention rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $o/${tool}_ea.log | tail -1) $(grep -h Synthesis $o/${tool}_ea.log | tail -1)")
done
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o $D
