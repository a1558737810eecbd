#!/usr/bin/env bash
# Session 6, call 1: correctness first. The kernel harnesses' float64 checks (edge-MLP attention,
# the sliced graph walkers, the scheduled CSR attention); the whole GPU test suite (new: the
# edge-attention providers against HOST f64, the anomaly-mode multi-tensor check, the gradient
# hand-off and gradient arena, the CSR schedules); the GAT on Cora (10 seeds) beside PyG (10 seeds);
# the edge-attention kernel timings. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
END=${END_S:-560}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
for h in bench_edge_attention bench_graph bench_attention_csr; do
  timeout $(tl 70) $R/bench/$h --check > $o/${h}_check.log 2>&1; echo "$h --check rc=$? $(grep -c FAIL $o/${h}_check.log) FAIL lines"
  grep FAIL $o/${h}_check.log | head -5; tail -1 $o/${h}_check.log
done
echo "elapsed ${SECONDS}s"
timeout $(tl 260) $R/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$? $(tail -1 $o/tests.log)"
grep -E "^FAILED|\[FAIL\]|Crash|Timed out" $o/tests.log | head -20
grep -A3 "Assertion Failed" $o/tests.log | grep -vE "^--$|Assertion Failed" | head -16
echo "elapsed ${SECONDS}s"
timeout $(tl 40) $R/examples/train_gat --device cuda --attention fused --seeds 10 --data examples/data/cora --out $o/gat --log-interval 5000 > $o/gat_fused.log 2>&1; echo "gat fused rc=$?"; tail -4 $o/gat_fused.log
timeout $(tl 15) $R/examples/train_gat --device cuda --attention fused --seeds 1 --profile --data examples/data/cora --out $o/gatp --log-interval 5000 > $o/gat_prof.log 2>&1; echo "gat profile rc=$?"; tail -6 $o/gat_prof.log
timeout $(tl 80) python3 bench/gat_torch.py --seeds 10 --device cuda > $o/gat_torch.log 2>&1; echo "gat_torch rc=$?"; tail -3 $o/gat_torch.log
timeout $(tl 60) $R/bench/bench_edge_attention --bench > $o/ea_bench.log 2>&1; echo "bench_edge_attention --bench rc=$?"; tail -20 $o/ea_bench.log
timeout $(tl 50) $R/bench/bench_graph --bench > $o/graph_bench.log 2>&1; echo "bench_graph --bench rc=$?"; tail -16 $o/graph_bench.log
rm -f $o/gat/*.ckpt $o/gatp/*.ckpt
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o
