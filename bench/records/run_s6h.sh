#!/usr/bin/env bash
# Session 6, call 8: after the duplicate-removal commit (ops/edge_attention.c helpers, the shared
# bench graph reader): the edge-attention tests (FUSED and COMPOSED against HOST f64) and
# bench_graph_ops reading graph_torch.py's 100k graph through bench/graph_file.h.
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}"
(cd $R/tests && ./test_edge_attention --jobs 4 2>&1 | tail -1)
(cd $R/tests && ./test_graph --jobs 4 2>&1 | tail -1)
timeout 60 python3 bench/graph_torch.py --save-graph $OUT/g --sizes 100k --only graph > /dev/null 2>&1; echo "graph save rc=$?"
timeout 60 $R/bench/bench_graph_ops --graph $OUT/g/radius_100k.bin --cutoff 0.035 --only gat; echo "bench_graph_ops rc=$?"
rm -rf $OUT/g
