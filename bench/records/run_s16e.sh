#!/usr/bin/env bash
# Session 16, call 5: the lane kernels' large-graph rule forced on test graphs (TIGA_EA_BIG=1: the
# (H 4, F 2) kernels that run from 2^18 rows, no test reached them before) and two new (4, 2) cases
# without dropout. test_edge_attention (stop on failure); memcheck and racecheck on its CUDA tests;
# the GPU suite; bench_edge_ops 400k hid 16 H 1 / H 4 (the rule by size) and H 4 with TIGA_EA_BIG=0,
# two rounds; ncu sections of k_products_bwd at 400k. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 120 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1); rc=$?
echo "test_edge_attention rc=$rc $(grep -h Synthesis $o/test_ea.log | tail -1)"
if [ $rc -ne 0 ]; then grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -40; pack; exit 1; fi
D=/tmp/s16e; mkdir -p $D
timeout 90 python3 bench/graph_torch.py --only graph --sizes 400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
B=$R/bench/bench_edge_ops
for rnd in 1 2; do
  for k in 0 2; do
    timeout 30 $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ops.log 2>&1; echo "400k/$k round $rnd: $(grep -v '^{' $o/ops.log | grep fused | awk '{print $(NF-1), $NF}')"
  done
  TIGA_EA_BIG=0 timeout 30 $B --graph $D/radius_400k.bin --providers fused --only 2 > $o/ops.log 2>&1; echo "400k/2 TIGA_EA_BIG=0 round $rnd: $(grep -v '^{' $o/ops.log | grep fused | awk '{print $(NF-1), $NF}')"
done
timeout 90 ncu --cache-control none -k regex:k_products_bwd -c 2 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy $B --graph $D/radius_400k.bin --providers fused --only 0 --reps 1 --warmup 1 > $o/ncu_pb.txt 2>&1; echo "ncu k_products_bwd rc=$?"
grep -E "Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Compute \(SM\)|Achieved Occupancy|Stall|Warp Cycles Per Issued|Mem Busy|Max Bandwidth|L2 Compression|Issued Warp" $o/ncu_pb.txt | head -40
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests && timeout 120 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
(cd $R/tests && timeout 200 compute-sanitizer --tool racecheck --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/racecheck_ea.log 2>&1
echo "racecheck (CUDA tests) rc=$? $(grep -hE 'RACECHECK SUMMARY' $o/racecheck_ea.log | tail -1) $(grep -h Synthesis $o/racecheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
mkdir -p $o/suite
L=$((570 - SECONDS)); [ $L -gt 150 ] && L=150
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout '$L' $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite (limit ${L}s a test): $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
