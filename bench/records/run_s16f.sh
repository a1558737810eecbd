#!/usr/bin/env bash
# Session 16, call 6: k_products_bwd with the weight sums by (slice, coordinate, 4 units) threads
# (four f32 sums a thread instead of 48; four blocks a SM instead of two). test_edge_attention (stop
# on failure); bench_edge_ops --check; 400k hid 16 H 1 / H 4 two rounds, 100k every config; ncu
# k_products_bwd (caches kept); memcheck and racecheck on test_edge_attention's CUDA tests; the GPU
# suite. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 120 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1); rc=$?
echo "test_edge_attention rc=$rc $(grep -h Synthesis $o/test_ea.log | tail -1)"
if [ $rc -ne 0 ]; then grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -40; pack; exit 1; fi
D=/tmp/s16f; mkdir -p $D
timeout 60 python3 bench/edge_attention_torch.py --sizes 2k --no-compile --dump $D > $o/fx.log 2>&1
timeout 90 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graphs rc=$?"
B=$R/bench/bench_edge_ops
timeout 30 $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
for rnd in 1 2; do for k in 0 2; do
  timeout 30 $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ops.log 2>&1; echo "400k/$k round $rnd: $(grep -v '^{' $o/ops.log | grep fused | awk '{print $(NF-1), $NF}')"
done; done
timeout 40 $B --graph $D/radius_100k.bin --providers fused > $o/ea_ops_100k.log 2>&1; echo "bench_edge_ops 100k rc=$?"; grep -v '^{' $o/ea_ops_100k.log | grep fused
P=$R/examples/train_pointcloud
for h in 1 4; do
  timeout 60 $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $h --quiet > $o/pc_h$h.log 2>&1; echo "train_pointcloud wide 400k H $h rc=$? $(grep -h 'training step' $o/pc_h$h.log | cut -c1-60)"
done
timeout 60 ncu --csv --cache-control none -k regex:k_products --metrics gpu__time_duration.sum $B --graph $D/radius_400k.bin --providers fused --only 0 --reps 2 --warmup 1 > $o/ncu_pb.csv 2>$o/ncu_pb.err; echo "ncu rc=$?"
python3 - $o/ncu_pb.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ik = h.index("Kernel Name"); iv = h.index("Metric Value"); iu = h.index("Metric Unit")
t = collections.defaultdict(list)
for r in rows[1:]:
    v = float(r[iv].replace(",", "")); u = r[iu]
    v = v / 1000 if u in ("nsecond", "ns") else v * 1000 if u in ("msecond", "ms") else v
    t[r[ik].split("(")[0].replace("void ", "")].append(v)
for n, v in t.items():
    print(f"  {n:40s} " + " ".join(f"{x:.1f}" for x in v) + " us")
PY
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests && timeout 120 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
(cd $R/tests && timeout 200 compute-sanitizer --tool racecheck --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/racecheck_ea.log 2>&1
echo "racecheck (CUDA tests) rc=$? $(grep -hE 'RACECHECK SUMMARY' $o/racecheck_ea.log | tail -1) $(grep -h Synthesis $o/racecheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 150 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
