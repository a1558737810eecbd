#!/usr/bin/env bash
# Session 14, call 2: the hidden-16 self-attention path on the edge_attention_products node, and
# the renumbered graph (ops/edge_attention.c). test_edge_attention (all), memcheck on its CUDA tests;
# bench_edge_ops --check against PyTorch on the 2k fixtures (by rule, products off, renumbering
# forced); steps on the 100k / 400k radius graphs by rule, renumbering off, products off.
# Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
(cd $R/tests && timeout 120 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -60
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s14b; mkdir -p $D
timeout 100 python3 bench/edge_attention_torch.py --sizes 2k --no-compile --dump $D > $o/fixtures.log 2>&1; echo "fixtures rc=$?"
timeout 100 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
B=$R/bench/bench_edge_ops
for v in "" "TIGA_EA_OWN=0" "TIGA_EA_RENUM=1"; do
  env $v timeout 60 $B --check $D > $o/check_$v.log 2>&1; echo "check [$v] rc=$? $(tail -1 $o/check_$v.log)"
done
echo "elapsed ${SECONDS}s"; pack
for s in 100k 400k; do
  for v in "" "TIGA_EA_RENUM=0" "TIGA_EA_OWN=0" ""; do
    for k in 0 2; do
      env $v timeout 60 $B --graph $D/radius_$s.bin --providers fused --only $k > $o/ops_$s.log 2>&1
      echo "== $s [$v] rc=$? $(grep -v '^{' $o/ops_$s.log | grep fused)"
    done
  done
done
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests
timeout 200 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck test_edge_attention (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
grep -h -A6 "Invalid\|Error" $o/memcheck_ea.log | head -20
echo "elapsed ${SECONDS}s"; pack
