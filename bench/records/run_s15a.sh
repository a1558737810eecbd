#!/usr/bin/env bash
# Session 15, call 1: the lane kernels built with and without their dropout code (DR), and a
# temporary switch (TIGA_EA_LNCAP "dst src fresh": blocks a SM for k_dst_ln / k_src_ln at (1, 8)
# and (4, 2); fresh 1 = the score weights read from shared memory at each edge instead of held in
# registers): test_edge_attention, bench_edge_ops --check, the hid-16 steps at 400k / 100k per
# setting, two rounds (100k by rule only); then the point-cloud step at 400k at H 1 (the seed's scalar score) and H 4
# beside bench/pointcloud_torch.py --heads 1 (eager, torch.compile). Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 60 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/test_ea.log | head -20
D=/tmp/s15a; mkdir -p $D
timeout 60 python3 bench/edge_attention_torch.py --sizes 2k --no-compile --dump $D > $o/fx.log 2>&1
timeout 90 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1
B=$R/bench/bench_edge_ops
timeout 30 $B --check $D > $o/check.log 2>&1; echo "check rc=$? $(tail -1 $o/check.log)"
for cap in "0 0 1" "0 3 1" "1 0 1" "3 3 1" "2 2 1" "1 2 1"; do
  TIGA_EA_LNCAP="$cap" timeout 30 $B --check $D > $o/check_c.log 2>&1; echo "check LNCAP '$cap' rc=$? $(tail -1 $o/check_c.log)"
done
echo "elapsed ${SECONDS}s"; pack
for r in 1 2; do
  for cap in "" "0 0 1" "0 3 1" "1 0 1" "3 3 1" "2 2 1" "1 2 1"; do
    line="round $r LNCAP '$cap':"
    for s in 400k $([ -z "$cap" ] && echo 100k); do for k in 0 2; do
      TIGA_EA_LNCAP="$cap" timeout 30 $B --graph $D/radius_$s.bin --providers fused --only $k > $o/ops.log 2>&1
      line="$line $s/$k $(grep -v '^{' $o/ops.log | grep fused | awk '{print $(NF-1)}' | head -1)"
    done; done
    echo "$line"
  done
done
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for h in 1 4; do
  timeout 60 $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $h --quiet > $o/pc_h$h.log 2>&1; echo "train_pointcloud 400k H $h rc=$?"; tail -2 $o/pc_h$h.log
done
echo "elapsed ${SECONDS}s"; pack
# ncu: per-kernel times of the hid-16 steps at 400k by rule, caches kept (warm, as in a step), and
# k_products_bwd's full section set (one launch)
for k in 0 2; do
  timeout 100 ncu --csv --cache-control none --metrics gpu__time_duration.sum $B --graph $D/radius_400k.bin --providers fused --only $k --reps 2 --warmup 1 > $o/ncu_$k.csv 2> $o/ncu_$k.err
  echo "ncu (warm) only $k rc=$?"
  python3 - $o/ncu_$k.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ik = h.index("Kernel Name"); iv = h.index("Metric Value"); iu = h.index("Metric Unit")
t = collections.defaultdict(float); c = collections.Counter()
for r in rows[1:]:
    v = float(r[iv].replace(",", "")); v = v / 1000 if r[iu] == "nsecond" else v
    name = r[ik].split("(")[0].split("<")[0].replace("void ", "")[:40]
    t[name] += v; c[name] += 1
tot = sum(t.values())
for n, v in sorted(t.items(), key=lambda x: -x[1])[:14]:
    print(f"  {n:42s} {v/3:9.1f} us/step  (x{c[n]})")
print(f"  total {tot/3:.1f} us/step (3 steps)")
PY
done
timeout 100 ncu --set full --cache-control none -k regex:k_products_bwd --launch-skip 1 -c 1 $B --graph $D/radius_400k.bin --providers fused --only 0 --reps 2 --warmup 1 > $o/ncu_pbwd.txt 2>&1
echo "ncu full k_products_bwd rc=$?"; grep -E "Duration|Achieved Occupancy|Registers Per|Theoretical Occupancy|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit|Memory Throughput|DRAM Throughput|Issue Slots Busy" $o/ncu_pbwd.txt | head -14
echo "elapsed ${SECONDS}s"; pack
timeout $((585 - SECONDS)) python3 bench/pointcloud_torch.py --sizes 400k --heads 1 > $o/pc_torch_h1.log 2>&1; echo "pointcloud_torch --heads 1 rc=$?"; grep -E "^\||compiled" $o/pc_torch_h1.log
echo "elapsed ${SECONDS}s"; pack
