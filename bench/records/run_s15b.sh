#!/usr/bin/env bash
# Session 15, call 2: k_products_bwd staged through shared memory (a 32-node tile's rows read once,
# the scattered accesses once per element); the lane kernels' switch of run_s15a.sh still in.
# test_edge_attention; memcheck and racecheck on its CUDA tests; bench_edge_ops --check by rule and
# with TIGA_EA_LNCAP "1 2 1"; the hid-16 steps at 400k / 100k by rule and "1 2 1", two rounds; ncu
# per-kernel times (caches kept) at 400k; the slice kernels (hidden 64) built without their dropout
# code where no dropout is asked: the hid-64 steps at 400k and the point-cloud step at 400k, H 1 and
# H 4 (run_s15a.sh: 9.671 / 12.733 ms). Carry ["gpu-carry"].
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
D=/tmp/s15b; mkdir -p $D
timeout 60 python3 bench/edge_attention_torch.py --sizes 2k --no-compile --dump $D > $o/fx.log 2>&1
timeout 90 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1
B=$R/bench/bench_edge_ops
timeout 30 $B --check $D > $o/check.log 2>&1; echo "check rc=$? $(tail -1 $o/check.log)"
TIGA_EA_LNCAP="1 2 1" timeout 30 $B --check $D > $o/check_c.log 2>&1; echo "check LNCAP '1 2 1' rc=$? $(tail -1 $o/check_c.log)"
echo "elapsed ${SECONDS}s"; pack
for r in 1 2; do
  for cap in "" "1 2 1"; do
    line="round $r LNCAP '$cap':"
    for s in 400k 100k; do for k in 0 2; do
      TIGA_EA_LNCAP="$cap" timeout 30 $B --graph $D/radius_$s.bin --providers fused --only $k > $o/ops.log 2>&1
      line="$line $s/$k $(grep -v '^{' $o/ops.log | grep fused | awk '{print $(NF-1), $NF}' | head -1)"
    done; done
    echo "$line"
  done
done
for k in 1 3; do
  timeout 30 $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ops.log 2>&1
  echo "400k/$k $(grep -v '^{' $o/ops.log | grep fused | awk '{print $(NF-1), $NF}' | head -1)"
done
P=$R/examples/train_pointcloud
for h in 1 4; do
  timeout 60 $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $h --quiet > $o/pc_h$h.log 2>&1; echo "train_pointcloud 400k H $h rc=$? $(tail -1 $o/pc_h$h.log)"
done
echo "elapsed ${SECONDS}s"; pack
for k in 0 2; do
  TIGA_EA_LNCAP="1 2 1" timeout 100 ncu --csv --cache-control none --metrics gpu__time_duration.sum $B --graph $D/radius_400k.bin --providers fused --only $k --reps 2 --warmup 1 > $o/ncu_$k.csv 2> $o/ncu_$k.err
  echo "ncu (warm, LNCAP '1 2 1') only $k rc=$?"
  python3 - $o/ncu_$k.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ik = h.index("Kernel Name"); iv = h.index("Metric Value"); iu = h.index("Metric Unit")
t = collections.defaultdict(float); c = collections.Counter()
for r in rows[1:]:
    v = float(r[iv].replace(",", "")); u = r[iu]
    v = v / 1000 if u in ("nsecond", "ns") else v * 1000 if u in ("msecond", "ms") else v
    name = r[ik] if r[ik].startswith("(") or r[ik].startswith("<") else r[ik].split("(")[0]
    t[name.replace("void ", "")[:50]] += v; c[name.replace("void ", "")[:50]] += 1
for n, v in sorted(t.items(), key=lambda x: -x[1])[:10]:
    print(f"  {n:50s} {v / c[n]:8.1f} us/launch (x{c[n]})")
PY
done
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests && timeout 120 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests && timeout $((590 - SECONDS)) compute-sanitizer --tool racecheck --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/racecheck_ea.log 2>&1
echo "racecheck (CUDA tests) rc=$? $(grep -hE 'RACECHECK SUMMARY' $o/racecheck_ea.log | tail -1) $(grep -h Synthesis $o/racecheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
