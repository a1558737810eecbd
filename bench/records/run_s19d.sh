#!/usr/bin/env bash
# Session 19, call 4: the submitted build (907cfe4's library: k_products / k_products_bwd through
# one load helper, a byte-identical sm_90 cubin). The GPU suite; memcheck on test_edge_attention's
# CUDA tests; bench_edge_ops at 400k hidden 16 H 1 / H 4, two rounds. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o/suite
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 150 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_edge_attention" $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests && timeout 150 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s19d; mkdir -p $D
timeout 120 python3 bench/graph_torch.py --only graph --sizes 400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
B=$R/bench/bench_edge_ops
for rnd in 1 2; do for k in 0 2; do timeout 40 $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ops_${k}_$rnd.log 2>&1; echo "400k --only $k: $(grep -v '^{' $o/ops_${k}_$rnd.log | grep fused | awk '{print $(NF-1), $NF}')"; done; done
echo "elapsed ${SECONDS}s"; pack
