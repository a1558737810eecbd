#!/usr/bin/env bash
# Session 9, call 2: upper bounds for folding the geometry (and b1) into the per-node products:
# bench_edge_ops on the 100k / 400k graphs with the call recorded without positions ("nopos": the
# kernels' per-edge geometry work gone, w1 without its geometry rows) and without b1 ("nob1"),
# beside the full call. Library: session 8's build (gpu-carry, f19f80d); bench_edge_ops rebuilt
# with --variant (gpu-carry-s9). Carry: ["gpu-carry", "gpu-carry-s9"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=/tmp/s9b; mkdir -p $D
timeout 90 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $OUT/graph.log 2>&1; echo "graph rc=$?"
timeout 60 python3 bench/graph_relabel.py $D/radius_400k.bin $D/radius_400k_morton.bin --order morton
B=gpu-carry-s9/bench_edge_ops
for s in 100k 400k 400k_morton; do
  for v in full nopos nob1 nopos,nob1; do
    echo "== $s $v"
    timeout 60 $B --graph $D/radius_$s.bin --providers fused --reps 20 --warmup 5 --variant $v | grep -v '^{' | grep fused
  done
done
echo "elapsed ${SECONDS}s"
timeout 60 ncu -k regex:'k_(fwd|dst|src)_pk' --launch-count 3 --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active $B --graph $D/radius_100k.bin --providers fused --only 0 --reps 1 --warmup 0 --variant nopos,nob1 > $OUT/ncu_nopos.txt 2>&1; echo "ncu rc=$?"
grep -E "k_(fwd|dst|src)_pk|duration|inst_executed|issue_active" $OUT/ncu_nopos.txt | sed 's/  */ /g' | cut -c1-120
timeout 60 ncu -k regex:'k_(fwd|dst|src)_pk' --launch-count 3 --metrics gpu__time_duration.sum,smsp__inst_executed.sum $B --graph $D/radius_100k.bin --providers fused --only 0 --reps 1 --warmup 0 > $OUT/ncu_full.txt 2>&1; echo "ncu rc=$?"
grep -E "k_(fwd|dst|src)_pk|duration|inst_executed" $OUT/ncu_full.txt | sed 's/  */ /g' | cut -c1-120
echo "elapsed ${SECONDS}s"
