#!/usr/bin/env bash
# Session 9, call 1: (1) how much of tg_edge_attention's fused step is the scattered gathers of the
# radius graphs' random node numbering: bench_edge_ops on the 100k / 400k graphs as built and on the
# same graphs renumbered (bench/graph_relabel.py: Morton order of the positions, and reverse
# Cuthill-McKee on the structure alone), plus the packed kernels' L1 / L2 hit rates (ncu) at 100k;
# (2) the skinny-GEMM kernels of branch ea-skinny: bench_skinny --check --bench.
# Library: session 8's build (gpu-carry, f19f80d). Carry: ["gpu-carry", "gpu-carry-s9"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=/tmp/s9a; mkdir -p $D
echo "== skinny"
timeout 120 gpu-carry-s9/bench_skinny --check --bench > $OUT/skinny.log 2>&1; echo "skinny rc=$?"
grep -v "^  ok" $OUT/skinny.log | tail -40
echo "elapsed ${SECONDS}s"
timeout 90 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $OUT/graph.log 2>&1; echo "graph rc=$?"
for s in 100k 400k; do
  for o in morton rcm; do timeout 60 python3 bench/graph_relabel.py $D/radius_$s.bin $D/radius_${s}_$o.bin --order $o; done
done
echo "elapsed ${SECONDS}s"
for s in 100k 400k; do
  for v in "" _morton _rcm; do
    echo "== $s$v"
    timeout 60 $R/bench/bench_edge_ops --graph $D/radius_$s$v.bin --providers fused --reps 20 --warmup 5 | grep -v '^{'
  done
done
echo "elapsed ${SECONDS}s"
for v in "" _morton; do
  echo "== ncu 100k$v config 0"
  timeout 60 ncu -k regex:'k_(fwd|dst|src)_pk' --launch-count 3 --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_bytes.sum,smsp__issue_active.avg.pct_of_peak_sustained_active $R/bench/bench_edge_ops --graph $D/radius_100k$v.bin --providers fused --only 0 --reps 1 --warmup 0 > $OUT/ncu$v.txt 2>&1; echo "ncu rc=$?"
  grep -E "k_(fwd|dst|src)_pk|duration|hit_rate|bytes|issue_active" $OUT/ncu$v.txt | sed 's/  */ /g' | cut -c1-120
done
echo "elapsed ${SECONDS}s"
