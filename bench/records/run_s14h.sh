#!/usr/bin/env bash
# Session 14, call 8: after the review's mend (the products kernels' weight load in one helper; the
# renumbering decision written as one condition; behaviour unchanged): test_edge_attention,
# memcheck on its CUDA tests, bench_edge_ops --check, the hid-16 steps at 400k. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 60 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
(cd $R/tests && timeout 90 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
D=/tmp/s14h; mkdir -p $D
timeout 60 python3 bench/edge_attention_torch.py --sizes 2k --no-compile --dump $D > $o/fx.log 2>&1
timeout 60 python3 bench/graph_torch.py --only graph --sizes 400k --save-graph $D > $o/graph.log 2>&1
B=$R/bench/bench_edge_ops
timeout 30 $B --check $D > $o/check.log 2>&1; echo "check rc=$? $(tail -1 $o/check.log)"
for k in 0 2; do timeout 30 $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ops.log 2>&1; echo "400k rc=$? $(grep -v '^{' $o/ops.log | grep fused)"; done
echo "elapsed ${SECONDS}s"
