#!/usr/bin/env bash
# Session 18, call 3: the graded order as built (ops/relation_form.c: windows of 1024 by default,
# TIGA_EA_GRADE=W to change, 0 off) and the products kernels' final forms; then, for hid 16 H 4 at
# 400k, the big rule's register caps through a temporary switch (TIGA_EA_LNCAP="F S": blocks a SM
# for the forward and the source pass) and two lanes a row (TIGA_EA_LANES=2); the window for the
# point-cloud models. test_edge_attention plainly and with TIGA_EA_BIG=1 TIGA_EA_LNCAP="1 1".
# Carry ["gpu-carry"].
# (TIGA_EA_LNCAP: switches in that build only, not in the tree.)
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for c in "" "1 1"; do
  (cd $R/tests && if [ -n "$c" ]; then export TIGA_EA_BIG=1 TIGA_EA_LNCAP="$c"; fi; timeout 150 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1); rc=$?
  echo "test_edge_attention ${c:+TIGA_EA_BIG=1 TIGA_EA_LNCAP="$c"} rc=$rc $(grep -h Synthesis $o/test_ea.log | tail -1)"
  if [ $rc -ne 0 ]; then grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -30; fi
done
D=/tmp/s18c; mkdir -p $D
timeout 120 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
B=$R/bench/bench_edge_ops
run() { local l=$1; shift; env "$@" > $o/ops.log 2>&1; echo "$l: $(grep -v '^{' $o/ops.log | grep fused | awk '{print $(NF-1), $NF}' | tr '\n' ' ')"; }
for rnd in 1 2; do
  for k in 0 1 2 3; do
    for W in 1024 512 2048; do
      run "400k/$k grade $W round $rnd" TIGA_EA_GRADE=$W timeout 40 $B --graph $D/radius_400k.bin --providers fused --only $k
    done
  done
  for c in "1 2" "2 1" "1 1"; do
    run "400k/2 caps $c round $rnd" TIGA_EA_LNCAP="$c" timeout 40 $B --graph $D/radius_400k.bin --providers fused --only 2
  done
  run "400k/2 lanes 2 round $rnd" TIGA_EA_LANES=2 timeout 40 $B --graph $D/radius_400k.bin --providers fused --only 2
done
for k in 0 1 2 3; do run "100k/$k" timeout 40 $B --graph $D/radius_100k.bin --providers fused --only $k; done
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for mh in "seed 1" "wide 1"; do set -- $mh; for W in 1024 512 256; do
  f=$o/pc_$1_$2_$W.log
  TIGA_EA_GRADE=$W timeout 60 $P --model $1 --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $2 --quiet > $f 2>&1
  echo "$1 H $2 grade $W rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//')"
done; done
echo "elapsed ${SECONDS}s"; pack
