#!/usr/bin/env bash
# Session 16, call 1: the point-cloud example's seed model (--model seed: seed 000's layer, the
# features averaged by the learned softmax, H 1) at 100k / 400k beside bench/pointcloud_torch.py
# --model seed (eager, torch.compile) in the same call; H 4 of it; the wide model at H 1 / H 4 as
# before; the freeze check on the GPU at N 2048 (fused). test_edge_attention first (stop on failure).
# Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 60 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1); rc=$?
echo "test_edge_attention rc=$rc $(grep -h Synthesis $o/test_ea.log | tail -1)"
if [ $rc -ne 0 ]; then pack; exit 1; fi
P=$R/examples/train_pointcloud
timeout 60 $P --device cuda --n 2048 --steps 200 --attention fused --quiet --check-freeze-ratio 2 > $o/pc_freeze.log 2>&1; echo "freeze 2048 fused rc=$? $(tail -1 $o/pc_freeze.log)"
for m in seed wide; do for h in 1 4; do for n in 100000 400000; do
  timeout 60 $P --model $m --device cuda --n $n --degree 17 --attention fused --steps 30 --heads $h --quiet > $o/pc_${m}_h${h}_$n.log 2>&1
  echo "$m H $h n $n rc=$? $(grep -h 'training step' $o/pc_${m}_h${h}_$n.log)"
done; done; done
for h in 1 4; do
  timeout $((560 - SECONDS)) python3 bench/pointcloud_torch.py --model seed --sizes 100k,400k --heads $h > $o/pc_torch_seed_h$h.log 2>&1; echo "pointcloud_torch seed H $h rc=$?"; grep -E "^\||compiled|FAIL" $o/pc_torch_seed_h$h.log
done
echo "elapsed ${SECONDS}s"; pack
