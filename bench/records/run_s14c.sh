#!/usr/bin/env bash
# Session 14, call 3: the renumbering's order for relations without positions (graph files): the
# graph's locality order bisected down to L-node pieces (TIGA_EA_RENUM_LEAF, an experiment's
# switch; 4096 is the schedule's order), hid-16 steps at 400k (bench_edge_ops --only 0 / 2), two
# rounds; test_edge_attention with the default. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 120 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -40
D=/tmp/s14c; mkdir -p $D
timeout 100 python3 bench/graph_torch.py --only graph --sizes 400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
B=$R/bench/bench_edge_ops
for rnd in 1 2; do
  for L in 4096 512 64 32 8 2; do
    for k in 0 2; do
      TIGA_EA_RENUM_LEAF=$L timeout 60 $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ops.log 2>&1
      echo "leaf $L rc=$? $(grep -v '^{' $o/ops.log | grep fused)"
    done
  done
done
echo "elapsed ${SECONDS}s"
