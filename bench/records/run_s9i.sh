#!/usr/bin/env bash
# Session 9, call 9: peak growth at ~4x the edges with the geometry fold (the submitted build, as
# run_s9h.sh): bench_edge_ops (fused, fold on and off) on the 100k points and on the same points
# with the cutoff scaled by 4^(1/3) ("100k-x4", bench/graph_torch.py). Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
D=/tmp/s9i; mkdir -p $D
timeout 120 python3 bench/graph_torch.py --only graph --sizes 100k,100k-x4 --save-graph $D > $OUT/graph.log 2>&1; echo "graph rc=$?"; grep -i "edges\|wrote" $OUT/graph.log | head -4
for s in 100k 100k-x4; do
  for f in 1 0; do
    TIGA_EA_FOLD=$f timeout 60 $R/bench/bench_edge_ops --graph $D/radius_$s.bin --providers fused > $OUT/ea_${s}_$f.log 2>&1; echo "bench_edge_ops $s fold=$f rc=$?"; grep -v '^{' $OUT/ea_${s}_$f.log | grep "fused\|graph"
  done
done
echo "elapsed ${SECONDS}s"
