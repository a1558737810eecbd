#!/usr/bin/env bash
# Session 5, call 1: the first run of the graph family on the H200 (build-gpu from gpu-prep at the
# call's commit). The whole test suite; the kernel harnesses' float64 checks (graph ops, CSR
# attention, radius builder); their benchmarks; the GAT on Cora (2 seeds fused, 1 composed) beside
# PyG (3 seeds); bench_graph_ops on graph_torch.py's 100k graph. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
export LD_LIBRARY_PATH="$PWD/build-gpu-run/rt:$PWD/build-gpu-run:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
B=build-gpu-run/bench
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
timeout 300 build-gpu-run/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$? $(tail -1 $o/tests.log)"
grep -E "^FAILED|\[FAIL\]" $o/tests.log | head -20
grep -B2 -A6 "Assertion Failed" $o/tests.log | grep -E "message|Assert|\.c:" | head -30
for h in bench_graph bench_attention_csr bench_radius; do
  [ -x $B/$h ] || { echo "$h missing"; continue; }
  timeout 60 $B/$h --check > $o/${h}_check.log 2>&1; echo "$h --check rc=$? $(grep -cE 'FAIL' $o/${h}_check.log) FAIL lines"
  grep -E "FAIL" $o/${h}_check.log | head -8; tail -2 $o/${h}_check.log
done
$B/check_radius > $o/check_radius.log 2>&1; echo "check_radius rc=$?"
timeout 120 python3 bench/graph_torch.py --save-graph $OUT/g --sizes 100k --only graph > $o/graph_save.log 2>&1; echo "graph save rc=$?"; tail -2 $o/graph_save.log
for h in bench_graph bench_attention_csr; do
  [ -x $B/$h ] && { timeout 60 $B/$h --bench --graph $OUT/g/radius_100k.bin > $o/${h}_bench.log 2>&1; echo "$h --bench rc=$?"; tail -14 $o/${h}_bench.log; }
done
timeout 60 $B/bench_radius --bench > $o/radius_bench.log 2>&1; echo "bench_radius rc=$?"; tail -6 $o/radius_bench.log
timeout 90 $B/bench_graph_ops --graph $OUT/g/radius_100k.bin --cutoff 0.035 > $o/graph_ops.log 2>&1; echo "bench_graph_ops rc=$?"; cat $o/graph_ops.log
timeout 60 build-gpu-run/examples/train_gat --device cuda --attention fused --seeds 2 --data examples/data/cora --out $o/gat_fused --log-interval 200 > $o/gat_fused.log 2>&1; echo "gat fused rc=$?"; tail -4 $o/gat_fused.log
timeout 60 build-gpu-run/examples/train_gat --device cuda --attention composed --seeds 1 --data examples/data/cora --out $o/gat_comp --log-interval 200 > $o/gat_comp.log 2>&1; echo "gat composed rc=$?"; tail -3 $o/gat_comp.log
timeout 90 python3 bench/gat_torch.py --seeds 3 --device cuda > $o/gat_torch.log 2>&1; echo "gat_torch rc=$?"; tail -4 $o/gat_torch.log
rm -rf $o/gat_fused/*.ckpt $o/gat_comp/*.ckpt
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o $OUT/g
