#!/usr/bin/env bash
# Session 12, call 2 (the submission's numbers): beside PyTorch in this call,
# edge_attention_torch.py (eager, torch.compile) on 2k (check fixtures), 100k, 400k and 100k-x4
# (the 100k points at 4^(1/3) the cutoff: ~4x the edges); bench_edge_ops --graph on its dumps
# (every config: times and peaks) and --check; then the point-cloud step at 400k
# (train_pointcloud --attention fused, and with TIGA_EA_ORDER=0) beside pointcloud_torch.py.
# Deadlines; logs in $OUT/logs.tgz. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-580}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
D=/tmp/s12b; mkdir -p $D
timeout $(tl 300) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k,100k-x4 --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; grep -E "^\||^graph" $o/ea_torch.log | grep -v "^| 2k"
B=$R/bench/bench_edge_ops
for s in 100k 400k 100k-x4; do
  timeout $(tl 40) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | grep fused
done
timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc.log 2>&1; echo "train_pointcloud 400k fused rc=$?"; tail -2 $o/pc.log
TIGA_EA_ORDER=0 timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc_noorder.log 2>&1; echo "train_pointcloud 400k fused TIGA_EA_ORDER=0 rc=$?"; tail -2 $o/pc_noorder.log
echo "elapsed ${SECONDS}s"; pack
timeout $(tl 200) python3 bench/pointcloud_torch.py --sizes 400k > $o/pc_torch.log 2>&1; echo "pointcloud_torch rc=$?"; grep -E "^\|" $o/pc_torch.log
echo "elapsed ${SECONDS}s"; pack
