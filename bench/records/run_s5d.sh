#!/usr/bin/env bash
# Session 5, call 4: the session's numbers beside PyTorch in one call: fused attention (issue 11's bar:
# tiga / PyTorch ratios within 3 % of BENCHMARKS.md), the graph workloads on graph_torch.py's radius graphs
# (PyG GATConv and the CSR attention baseline against bench_graph_ops), the GAT on Cora (10 seeds each).
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz 2>/dev/null || true
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-540}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
timeout $(tl 100) $R/bench/bench_attention --bench > $o/attn_ours.log 2>&1; echo "bench_attention rc=$?"
timeout $(tl 170) python3 bench/attention_torch.py > $o/attn_torch.log 2>&1; echo "attention_torch rc=$?"
python3 bench/attention_torch.py --join $o/attn_ours.log $o/attn_torch.log > $o/attn_join.txt 2>&1; cat $o/attn_join.txt | tail -30
timeout $(tl 40) $R/examples/train_gat --device cuda --attention fused --seeds 10 --data examples/data/cora --out $o/gat --log-interval 5000 > $o/gat_fused.log 2>&1; echo "gat fused rc=$?"; tail -4 $o/gat_fused.log
timeout $(tl 80) python3 bench/gat_torch.py --seeds 10 --device cuda > $o/gat_torch.log 2>&1; echo "gat_torch rc=$?"; tail -3 $o/gat_torch.log
timeout $(tl 150) python3 bench/graph_torch.py --save-graph $OUT/g --sizes 100k,400k --only graph,a,b --no-compile > $o/graph_torch.log 2>&1; echo "graph_torch rc=$?"; tail -12 $o/graph_torch.log
for s in 100k:0.035 400k:0.022; do
  n=${s%%:*} c=${s##*:}
  timeout $(tl 50) $R/bench/bench_graph_ops --graph $OUT/g/radius_$n.bin --cutoff $c > $o/graph_ops_$n.log 2>&1; echo "bench_graph_ops $n rc=$?"; tail -8 $o/graph_ops_$n.log
done
rm -f $o/gat/*.ckpt
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o $OUT/g
