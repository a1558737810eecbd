#!/usr/bin/env bash
# Session 14, call 1: (1) how much of the hid-16 step at 400k the random node numbering still costs
# with the lane kernels and the locality schedule: bench_edge_ops on graph_torch.py's 100k / 400k
# radius graphs as built and renumbered in Morton order (bench/graph_relabel.py; the upper bound of
# renumbering inside the op, no permutation cost), the schedule by rule and off.
# Library: session 13's submitted build (gpu-carry). Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
D=/tmp/s14a; mkdir -p $D
timeout 100 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
for s in 100k 400k; do timeout 60 python3 bench/graph_relabel.py $D/radius_$s.bin $D/radius_${s}_morton.bin --order morton; done
echo "elapsed ${SECONDS}s"
B=$R/bench/bench_edge_ops
run() { # size variant order tag
  if [ $3 = rule ]; then unset TIGA_EA_ORDER; else export TIGA_EA_ORDER=$3; fi
  timeout 60 $B --graph $D/radius_$1$2.bin --providers fused > $o/ops_$1$2_$3.$4.log 2>&1
  echo "== $1$2 order=$3 ($4) rc=$?"; grep -v '^{' $o/ops_$1$2_$3.$4.log | grep fused
}
for s in 100k 400k; do run $s "" rule a; run $s _morton rule a; run $s _morton 0 a; done
run 400k "" rule b; run 400k _morton rule b
unset TIGA_EA_ORDER
echo "elapsed ${SECONDS}s"; pack
