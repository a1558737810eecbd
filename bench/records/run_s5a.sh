#!/usr/bin/env bash
# Session 5, call 1: the first run of the graph family on the H200 (build-gpu-run packed by
# tools/gpu_pack.sh at the call's commit). The kernel harnesses' float64 checks (graph ops, CSR
# attention, radius builder); the whole test suite; their benchmarks on graph_torch.py's 100k graph;
# bench_graph_ops; the GAT on Cora (fused, 2 seeds) beside PyG (2 seeds). Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
export LD_LIBRARY_PATH="$PWD/build-gpu-run/rt:$PWD/build-gpu-run:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
B=build-gpu-run/bench
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
pwd
for h in bench_graph bench_attention_csr bench_radius; do
  timeout 50 $B/$h --check > $o/${h}_check.log 2>&1; echo "$h --check rc=$? $(grep -c FAIL $o/${h}_check.log) FAIL lines"
  grep FAIL $o/${h}_check.log | head -6; tail -1 $o/${h}_check.log
done
$B/check_radius > $o/check_radius.log 2>&1; echo "check_radius rc=$? $(tail -1 $o/check_radius.log)"
timeout 330 build-gpu-run/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$? $(tail -1 $o/tests.log)"
grep -E "^FAILED|\[FAIL\]" $o/tests.log | head -20
grep -A3 "Assertion Failed" $o/tests.log | grep -vE "^--$|Assertion Failed" | head -24
timeout 60 python3 bench/graph_torch.py --save-graph $OUT/g --sizes 100k --only graph > $o/graph_save.log 2>&1; echo "graph save rc=$?"; tail -1 $o/graph_save.log
G=$OUT/g/radius_100k.bin
timeout 40 $B/bench_graph --bench --graph $G > $o/bench_graph.log 2>&1; echo "bench_graph rc=$?"; tail -12 $o/bench_graph.log
timeout 40 $B/bench_attention_csr --bench --graph $G > $o/bench_csr.log 2>&1; echo "bench_attention_csr rc=$?"; tail -10 $o/bench_csr.log
timeout 30 $B/bench_radius --bench > $o/radius_bench.log 2>&1; echo "bench_radius rc=$?"; tail -4 $o/radius_bench.log
timeout 60 $B/bench_graph_ops --graph $G --cutoff 0.035 > $o/graph_ops.log 2>&1; echo "bench_graph_ops rc=$?"; cat $o/graph_ops.log | tail -9
timeout 40 build-gpu-run/examples/train_gat --device cuda --attention fused --seeds 2 --data examples/data/cora --out $o/gat --log-interval 300 > $o/gat_fused.log 2>&1; echo "gat fused rc=$?"; tail -4 $o/gat_fused.log
timeout 40 python3 bench/gat_torch.py --seeds 2 --device cuda > $o/gat_torch.log 2>&1; echo "gat_torch rc=$?"; tail -4 $o/gat_torch.log
rm -f $o/gat/*.ckpt
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o $OUT/g
