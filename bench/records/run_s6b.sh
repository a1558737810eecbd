#!/usr/bin/env bash
# Session 6, call 2: edge-MLP attention beside PyTorch in one call. bench/edge_attention_torch.py
# (eager and torch.compile, f32) on graph_torch.py's radius graphs of 100k / 400k nodes, which it
# dumps; bench_edge_ops on the same files (fused and composed, fwd + bwd through the public API) and
# its --check against PyTorch's outputs and gradients on 2k-node fixtures; the point-cloud model's
# full training step at 400k points beside the same model in PyTorch (eager, torch.compile); the
# trained-vs-frozen ratio on the GPU. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
D=$OUT/ea
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-560}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
timeout $(tl 260) python3 bench/edge_attention_torch.py --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; tail -14 $o/ea_torch.log
echo "elapsed ${SECONDS}s"
timeout $(tl 40) $R/bench/bench_edge_ops --check $D > $o/ea_ops_check.log 2>&1; echo "bench_edge_ops --check rc=$?"; grep -E "FAIL" $o/ea_ops_check.log | head -6; tail -2 $o/ea_ops_check.log
for s in 100k 400k; do
  timeout $(tl 60) $R/bench/bench_edge_ops --graph $D/radius_$s.bin > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | tail -12
done
echo "elapsed ${SECONDS}s"
timeout $(tl 120) python3 bench/pointcloud_torch.py --sizes 400k > $o/pc_torch.log 2>&1; echo "pointcloud_torch rc=$?"; tail -6 $o/pc_torch.log
for a in fused composed; do
  timeout $(tl 50) $R/examples/train_pointcloud --device cuda --n 400000 --degree 17 --attention $a --steps 30 --quiet > $o/pc_$a.log 2>&1; echo "train_pointcloud 400k $a rc=$?"; tail -2 $o/pc_$a.log
done
timeout $(tl 40) $R/examples/train_pointcloud --device cuda --n 400000 --degree 17 --attention fused --dtype bf16 --steps 30 --quiet > $o/pc_bf16.log 2>&1; echo "train_pointcloud 400k fused bf16 rc=$?"; tail -2 $o/pc_bf16.log
timeout $(tl 60) $R/examples/train_pointcloud --device cuda --attention fused --check-freeze-ratio 2 > $o/pc_ratio.log 2>&1; echo "freeze ratio rc=$?"; tail -3 $o/pc_ratio.log
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o $D
