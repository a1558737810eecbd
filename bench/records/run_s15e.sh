#!/usr/bin/env bash
# Session 15, call 5 (the submitted build): run_s15d.sh's kernels with k_products back to session
# 14's (the quad-shared loads measured no faster: 45.2 against 44.6 µs). test_edge_attention (stop on
# failure); --check; memcheck on its CUDA tests; bench_edge_ops 400k hid 16 H 1 / H 4, two rounds,
# and 100k every config. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 60 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1); rc=$?
echo "test_edge_attention rc=$rc $(grep -h Synthesis $o/test_ea.log | tail -1)"
if [ $rc -ne 0 ]; then grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -40; pack; exit 1; fi
D=/tmp/s15e; mkdir -p $D
timeout 60 python3 bench/edge_attention_torch.py --sizes 2k --no-compile --dump $D > $o/fx.log 2>&1
timeout 90 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1
B=$R/bench/bench_edge_ops
timeout 30 $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
(cd $R/tests && timeout 60 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
for rnd in 1 2; do for k in 0 2; do
  timeout 30 $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ops.log 2>&1; echo "400k/$k round $rnd: $(grep -v '^{' $o/ops.log | grep fused | awk '{print $(NF-1), $NF}')"
done; done
timeout 40 $B --graph $D/radius_100k.bin --providers fused > $o/ea_ops_100k.log 2>&1; echo "bench_edge_ops 100k rc=$?"; grep -v '^{' $o/ea_ops_100k.log | grep fused
echo "elapsed ${SECONDS}s"; pack
