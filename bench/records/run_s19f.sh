#!/usr/bin/env bash
# Session 19, call 6: an experiment behind TIGA_CSR_GRADE=1 (that build only): the fused CSR
# attention walking the relation's graded order (windows of 1024 by degree, as the edge attention
# since session 18) instead of the plain locality order. bench_graph_ops --only csr on the 100k and
# 400k radius graphs, both ways, two rounds; test_attention plainly and with the switch.
# Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
D=/tmp/s19f; mkdir -p $D
(timeout 120 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?") &
for e in 0 1; do (cd $R/tests && TIGA_CSR_GRADE=$e timeout 150 ./test_attention --jobs 4 > $o/att_$e.log 2>&1; echo "test_attention grade $e rc=$? $(grep -h Synthesis $o/att_$e.log | tail -1)"); done
wait
echo "elapsed ${SECONDS}s"; pack
B=$R/bench/bench_graph_ops
for rnd in 1 2; do for sz in "400k 0.022" "100k 0.035"; do set -- $sz; for e in 0 1; do
  f=$o/csr_${1}_${e}_r${rnd}.log
  TIGA_CSR_GRADE=$e timeout 120 $B --graph $D/radius_$1.bin --cutoff $2 --only csr > $f 2>&1
  echo "$1 grade $e r$rnd rc=$?: $(grep -E '^csr attention' $f | awk '{printf "%s | ", $0}' | tr -s ' ')"
done; done; done
echo "elapsed ${SECONDS}s"; pack
