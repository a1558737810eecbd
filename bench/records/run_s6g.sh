#!/usr/bin/env bash
# Session 6, call 7: issue 13's remaining checks after the CSR locality schedule — CSR attention's
# peak growth at ~4x the edges (same points, larger cutoff; bench_graph_ops --only csr on
# graph_torch.py's 100k graph) and the fused CSR attention tests (schedule tests included) under
# compute-sanitizer memcheck and racecheck.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
timeout 60 python3 bench/graph_torch.py --save-graph $OUT/g --sizes 100k --only graph > $OUT/graph_save.log 2>&1; echo "graph save rc=$?"
timeout 60 $R/bench/bench_graph_ops --graph $OUT/g/radius_100k.bin --cutoff 0.035 --only csr; echo "bench_graph_ops rc=$?"
rm -rf $OUT/g
for tool in memcheck racecheck; do
  (cd $R/tests && timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 ./test_attention --filter 'attention_cuda/*csr*' --jobs 1 > $OUT/${tool}_csr.log 2>&1
   echo "$tool csr attention tests rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $OUT/${tool}_csr.log | tail -1) $(grep -h Synthesis $OUT/${tool}_csr.log | tail -1)")
done
