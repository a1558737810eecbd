#!/usr/bin/env bash
# Session 5, call 6: the graph walker splits rows longer than 32 edges into 16-edge pieces (was:
# rows over 256 edges, one piece per group). Checks: the graph suite and the float64 check of every
# graph kernel; then the GAT on Cora (10 seeds, step time) and the graph workloads at 100k, to compare
# with run_s5d.sh (same binaries otherwise).
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-230}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
for t in test_graph test_gat test_graph_geometry test_radius; do
  (cd $R/tests && timeout $(tl 60) ./$t --jobs 1 > $o/$t.log 2>&1; echo "$t rc=$? $(grep -h Synthesis $o/$t.log | tail -1)")
done
grep -h -A3 "Assertion Failed" $o/test_*.log | head -12
timeout $(tl 60) $R/bench/bench_graph --check > $o/bench_graph_check.log 2>&1; echo "bench_graph --check rc=$?"; tail -n 2 $o/bench_graph_check.log
timeout $(tl 40) $R/examples/train_gat --device cuda --attention fused --seeds 10 --data examples/data/cora --out $o/gat --log-interval 5000 > $o/gat_fused.log 2>&1; echo "gat fused rc=$?"; tail -n 3 $o/gat_fused.log
timeout $(tl 20) $R/examples/train_gat --device cuda --attention fused --seeds 1 --profile --data examples/data/cora --out $o/gatp --log-interval 5000 > $o/gat_profile.log 2>&1; echo "gat profile rc=$?"; head -n 3 $o/gat_profile.log
timeout $(tl 40) python3 bench/graph_torch.py --save-graph $OUT/g --sizes 100k --only graph > $o/graph_save.log 2>&1; echo "graph save rc=$?"
timeout $(tl 60) $R/bench/bench_graph_ops --graph $OUT/g/radius_100k.bin --cutoff 0.035 --only gat,reduce > $o/graph_ops_100k.log 2>&1; echo "bench_graph_ops 100k rc=$?"; tail -n 5 $o/graph_ops_100k.log
rm -rf $o/gat $o/gatp
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o $OUT/g
