#!/usr/bin/env bash
# Session 20, call 7: the slice kernels' position gradients summed per row / source (dpd[i] from
# wp . rs, dps[j] from wp . dU after the edge loop) instead of per edge (24 FMAs a lane and edge
# fewer in each backward pass; SASS an edge k_dst_sl<1, 8, 1, 4> 284 -> 260, k_src_sl<1, 8, 1, 5>
# 251 -> 214). test_edge_attention; memcheck and racecheck on its CUDA tests; bench_edge_ops hidden
# 64 at 400k (two rounds) and 100k; the point-cloud models at 400k (two rounds); PyTorch's seed
# model in the same call. Baseline: run_s20c.sh (hidden 64) and run_s20f.sh (point cloud).
# Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
D=/tmp/s20g; mkdir -p $D
(timeout 150 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?") &
(cd $R/tests && timeout 150 ./test_edge_attention --jobs 4 > $o/ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/ea.log | tail -1)")
for tool in memcheck racecheck; do
  x=(); [ $tool = memcheck ] && x=(--leak-check full)
  (cd $R/tests && timeout 280 compute-sanitizer --tool $tool "${x[@]}" --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/${tool}_ea.log 2>&1
  echo "$tool test_edge_attention CUDA tests rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/${tool}_ea.log | tail -1) $(grep -h Synthesis $o/${tool}_ea.log | tail -1)") &
done
wait
echo "elapsed ${SECONDS}s"; pack
B=$R/bench/bench_edge_ops
run() { local l=$1; shift; env "$@" > $o/ops_$l.log 2>&1; echo "$l: $(grep -v '^{' $o/ops_$l.log | grep fused | awk '{print $(NF-1), $NF}' | tr '\n' ' ')"; }
for rnd in 1 2; do for k in 1 3; do run "400k_${k}_r$rnd" timeout 60 $B --graph $D/radius_400k.bin --providers fused --only $k; done; done
for k in 1 3; do run "100k_$k" timeout 60 $B --graph $D/radius_100k.bin --providers fused --only $k; done
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for rnd in 1 2; do for mh in "seed 1" "seed 1 --recompute" "wide 1"; do set -- $mh
  f=$o/pc_$1_h$2${3:+_rc}_$rnd.log
  timeout 60 $P --model $1 --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $2 --quiet ${3:-} > $f 2>&1
  echo "$1 H $2 ${3:-kept} r$rnd rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//') | $(grep -h '^loss' $f | cut -c1-50)"
done; done
echo "elapsed ${SECONDS}s"; pack
timeout 200 python3 bench/pointcloud_torch.py --model seed --sizes 400k --heads 1 > $o/pc_torch_seed_h1.log 2>&1; echo "pointcloud_torch seed H 1 rc=$?"; grep -E "^\||compiled|FAIL" $o/pc_torch_seed_h1.log
echo "elapsed ${SECONDS}s"; pack
