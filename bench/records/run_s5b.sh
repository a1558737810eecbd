#!/usr/bin/env bash
# Session 5, call 2: the suite after call 1's fixes; compute-sanitizer on the graph family; the graph
# benchmarks through the public API at 100k and 400k (graph_torch.py's graphs); where a GAT step's time
# goes (phases, tape overhead, per-kernel GPU time of one step). Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
B=$R/bench
timeout 200 $R/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$? $(tail -1 $o/tests.log)"
grep -E "^FAILED|\[FAIL\]" $o/tests.log | head -20
grep -A3 "Assertion Failed" $o/tests.log | grep -vE "^--$|Assertion Failed|^\[----\]   $" | head -20
timeout 60 python3 bench/graph_torch.py --save-graph $OUT/g --sizes 100k,400k --only graph > $o/graph_save.log 2>&1; echo "graph save rc=$?"; tail -1 $o/graph_save.log
for s in 100k:0.035 400k:0.022; do
  n=${s%%:*} c=${s##*:}
  timeout 90 $B/bench_graph_ops --graph $OUT/g/radius_$n.bin --cutoff $c > $o/graph_ops_$n.log 2>&1; echo "bench_graph_ops $n rc=$?"; tail -8 $o/graph_ops_$n.log
done
timeout 30 $R/examples/train_gat --device cuda --attention fused --seeds 1 --profile --data examples/data/cora --out $o/gat --log-interval 1000 > $o/gat_profile.log 2>&1; echo "gat profile rc=$?"; tail -4 $o/gat_profile.log
timeout 30 $R/examples/train_gat --device cuda --attention composed --seeds 1 --profile --data examples/data/cora --out $o/gatc --log-interval 1000 > $o/gatc_profile.log 2>&1; echo "gat composed rc=$?"; tail -3 $o/gatc_profile.log
timeout 30 $B/bench_tape > $o/tape.log 2>&1; echo "bench_tape rc=$?"; tail -4 $o/tape.log
timeout 120 ncu --metrics gpu__time_duration.sum --csv --launch-skip 300 --launch-count 160 $R/examples/train_gat --device cuda --attention fused --seeds 1 --epochs 6 --data examples/data/cora --out $o/gatn --quiet > $o/ncu_gat.csv 2> $o/ncu_gat.err; echo "ncu rc=$?"
python3 - $o/ncu_gat.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if rows:
    h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value")
    agg = collections.defaultdict(lambda: [0, 0.0])
    for r in rows[1:]:
        try: v = float(r[vi].replace(",", ""))
        except ValueError: continue
        a = agg[r[ki][:60]]; a[0] += 1; a[1] += v
    tot = sum(a[1] for a in agg.values())
    print(f"ncu: {sum(a[0] for a in agg.values())} kernels, {tot/1e3:.1f} us GPU time")
    for k, a in sorted(agg.items(), key=lambda x: -x[1][1])[:14]:
        print(f"  {a[1]/1e3:8.1f} us  x{a[0]:3d}  {k}")
PY
timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 $R/tests/test_graph --filter 'graph_cuda/*' --jobs 1 > $o/mc_graph.log 2>&1; echo "memcheck test_graph rc=$? $(grep -h 'ERROR SUMMARY' $o/mc_graph.log | tail -1)"
for t in test_radius test_graph_geometry test_reduce test_lifetime; do
  (cd $R/tests && timeout 60 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./$t --jobs 1 > $o/mc_$t.log 2>&1; echo "memcheck $t rc=$? $(grep -h 'ERROR SUMMARY' $o/mc_$t.log | tail -1)")
done
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 99 $B/bench_graph --check > $o/race_graph.log 2>&1; echo "racecheck bench_graph rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race_graph.log | tail -1)"
rm -rf $o/gat $o/gatc $o/gatn
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o $OUT/g
