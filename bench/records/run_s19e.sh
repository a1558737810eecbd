#!/usr/bin/env bash
# Session 19, call 5: the values' renumbering folded into the products node (values = x's own rows
# on a renumbered graph: k_products writes them in the new order, k_products_bwd adds their gradient
# into x's; no rows_renumbered node, nodes may now have three outputs). The GPU suite;
# test_edge_attention (its renumbered test now also runs values = reshape(1 * x), the rows node's
# path); memcheck and racecheck on its CUDA tests; bench_edge_ops at 400k (two rounds) and 100k,
# hidden 16 H 1 / H 4 (and hidden 64 once: the slice path, untouched); ncu per launch at 400k H 4
# at the step's clock. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o/suite
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 150 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_edge_attention" $o/suite_summary.txt; grep -h -A3 "renumbered" $o/suite/test_edge_attention.log | head -20
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s19e; mkdir -p $D
(timeout 120 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?") &
for tool in memcheck racecheck; do
  x=(); [ $tool = memcheck ] && x=(--leak-check full)
  (cd $R/tests && timeout 200 compute-sanitizer --tool $tool "${x[@]}" --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/renumbered*' > $o/${tool}_ea_renum.log 2>&1
  echo "$tool renumbered test rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/${tool}_ea_renum.log | tail -1) $(grep -h Synthesis $o/${tool}_ea_renum.log | tail -1)") &
done
(cd $R/tests && timeout 200 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/[!r]*' > $o/memcheck_ea.log 2>&1
echo "memcheck other CUDA tests rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
wait
echo "elapsed ${SECONDS}s"; pack
B=$R/bench/bench_edge_ops
for rnd in 1 2; do for k in 0 2; do timeout 40 $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ops_${k}_$rnd.log 2>&1; echo "400k --only $k: $(grep -v '^{' $o/ops_${k}_$rnd.log | grep fused | awk '{print $(NF-1), $NF}')"; done; done
for k in 0 2 1; do timeout 40 $B --graph $D/radius_100k.bin --providers fused --only $k > $o/ops100_${k}.log 2>&1; echo "100k --only $k: $(grep -v '^{' $o/ops100_${k}.log | grep fused | awk '{print $(NF-1), $NF}')"; done
timeout 40 $B --graph $D/radius_400k.bin --providers fused --only 1 > $o/ops_1.log 2>&1; echo "400k --only 1: $(grep -v '^{' $o/ops_1.log | grep fused | awk '{print $(NF-1), $NF}')"
echo "elapsed ${SECONDS}s"; pack
timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum $B --graph $D/radius_400k.bin --providers fused --only 2 --reps 2 --warmup 1 > $o/ncu_all_2.csv 2>&1; echo "ncu --only 2 rc=$?"
python3 - $o/ncu_all_2.csv <<'PY'
import csv, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
ks = [(r["Kernel Name"].split("(")[0].replace("void ", "")[:60], float(r["Metric Value"].replace(",", "")) / 1e3) for r in csv.DictReader(rows)]
st = [i for i, (n, _) in enumerate(ks) if "k_fwd_" in n]
for a, b in zip(st, st[1:]):
    print(f"  span: {b - a} launches, {sum(t for _, t in ks[a:b]):.1f} us")
for n, t in ks[st[-2]:st[-1]]:
    print(f"    {t:8.1f} us  {n}")
PY
echo "elapsed ${SECONDS}s"; pack
