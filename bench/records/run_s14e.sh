#!/usr/bin/env bash
# Session 14, call 5: which node order the renumbering wants. The 400k graph renumbered before the
# call by bench/graph_relabel.py (Morton of the positions, reverse Cuthill-McKee, BFS, random), run
# with the op's renumbering and schedule off (the data order alone); as built with the op's
# renumbering in the graph's own order without bisection (TIGA_EA_RENUM_LEAF=0) and with 32-node
# pieces (the default). Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
D=/tmp/s14e; mkdir -p $D
timeout 100 python3 bench/graph_torch.py --only graph --sizes 400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
for ord in morton rcm bfs random; do timeout 100 python3 bench/graph_relabel.py $D/radius_400k.bin $D/radius_400k_$ord.bin --order $ord; done
B=$R/bench/bench_edge_ops
run() { # file env...
  local f=$1; shift
  for k in 0 2; do
    env "$@" timeout 60 $B --graph $D/$f.bin --providers fused --only $k > $o/ops.log 2>&1
    echo "$f [$*] rc=$? $(grep -v '^{' $o/ops.log | grep fused)"
  done
}
for rnd in 1 2; do
  for ord in morton rcm bfs random; do run radius_400k_$ord TIGA_EA_RENUM=0 TIGA_EA_ORDER=0; done
  run radius_400k TIGA_EA_RENUM_LEAF=0
  run radius_400k X=1
done
echo "elapsed ${SECONDS}s"
