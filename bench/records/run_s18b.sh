#!/usr/bin/env bash
# Session 18, call 2: two experiments behind temporary switches. TIGA_ORDER_GRADE=W: each window of
# W entries of a square graph's locality order (the schedule, and the renumbering) sorted by the
# rows' degree, so that a warp's lanes walk rows of about one length (at 400k the lane kernels run
# a lane a row). TIGA_EA_DSTSW=1: k_dst_ln<4, 2>'s dw2 sums in shared memory at two blocks a SM
# (128 registers, 312 B spilled) instead of registers at one. test_edge_attention plainly and under
# both switches (TIGA_EA_BIG=1: the (4, 2) rule on the test graphs); bench_edge_ops 400k (hid 16 /
# 64, H 1 / 4) and 100k; ncu per-launch times of the edge kernels at 400k hid 16 H 4; the
# point-cloud models at 400k. Carry ["gpu-carry"].
# (TIGA_ORDER_GRADE and TIGA_EA_DSTSW: switches in that build only, not in the tree.)
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for e in "" "TIGA_ORDER_GRADE=256" "TIGA_EA_DSTSW=1 TIGA_EA_BIG=1" "TIGA_ORDER_GRADE=4096 TIGA_EA_DSTSW=1 TIGA_EA_BIG=1"; do
  (cd $R/tests && env $e timeout 150 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1); rc=$?
  echo "test_edge_attention ${e:-plain} rc=$rc $(grep -h Synthesis $o/test_ea.log | tail -1)"
  if [ $rc -ne 0 ]; then grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -30; fi
done
D=/tmp/s18b; mkdir -p $D
timeout 120 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
B=$R/bench/bench_edge_ops
run() { # label env... -- args
  local l=$1; shift; env "$@" > $o/ops.log 2>&1; echo "$l: $(grep -v '^{' $o/ops.log | grep fused | awk '{print $(NF-1), $NF}' | tr '\n' ' ')"
}
for rnd in 1 2; do
  for k in 0 1 2 3; do
    for W in 0 256 1024 4096; do
      run "400k/$k grade $W round $rnd" TIGA_ORDER_GRADE=$W timeout 40 $B --graph $D/radius_400k.bin --providers fused --only $k
    done
  done
  for W in 0 1024; do
    run "400k/2 DSTSW grade $W round $rnd" TIGA_EA_DSTSW=1 TIGA_ORDER_GRADE=$W timeout 40 $B --graph $D/radius_400k.bin --providers fused --only 2
  done
done
for k in 0 2; do for W in 0 256 4096; do
  run "100k/$k grade $W" TIGA_ORDER_GRADE=$W timeout 40 $B --graph $D/radius_100k.bin --providers fused --only $k
done; done
echo "elapsed ${SECONDS}s"; pack
for W in 0 1024; do
  TIGA_ORDER_GRADE=$W timeout 90 ncu --csv --metrics gpu__time_duration.sum -k regex:'k_(fwd|dst|src)_ln|k_products' -c 16 $B --graph $D/radius_400k.bin --providers fused --only 2 --reps 3 --warmup 1 > $o/ncu_ln.csv 2>&1; echo "ncu H 4 grade $W rc=$?"
  python3 - $o/ncu_ln.csv <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
d = collections.defaultdict(list)
for r in csv.DictReader(rows):
    d[(r["Kernel Name"].split("(")[0], r.get("Metric Unit", ""))].append(float(r["Metric Value"].replace(",", "")))
for (k, u), v in sorted(d.items()):
    v.sort(); print(f"  {k}: {len(v)} launches, median {v[len(v)//2]:.1f} {u}")
PY
done
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for m in seed wide; do for W in 0 256 4096; do
  f=$o/pc_${m}_$W.log
  TIGA_ORDER_GRADE=$W timeout 60 $P --model $m --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads 1 --quiet > $f 2>&1
  echo "$m H 1 grade $W rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//') $(grep -h 'loss' $f | tail -1 | cut -c1-80)"
done; done
echo "elapsed ${SECONDS}s"; pack
