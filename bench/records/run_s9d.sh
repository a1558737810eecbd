#!/usr/bin/env bash
# Session 9, call 4: the library with (a) the unrolled group / across butterflies (graph_walk.cuh,
# edge_attention.cuh), (b) vector-only U / V gathers in the edge kernels, (c) the geometry fold of
# tg_edge_attention's f32 FUSED path (cuda/edge_attention_fold.cu): the GPU suite (binaries in
# parallel); bench_edge_ops on the 100k / 400k graphs with the fold on and off (TIGA_EA_FOLD=0);
# memcheck and racecheck on test_edge_attention's CUDA tests. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-540}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
D=/tmp/s9d; mkdir -p $D
(timeout 90 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?" > $o/graph_rc.txt) &
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 6 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 170 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) failed"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_(edge_attention|graph[a-z_]*|attention_csr[a-z_]*|radius) " $o/suite_summary.txt
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/suite/*.log | head -60
echo "elapsed ${SECONDS}s"; pack
wait; cat $o/graph_rc.txt
for s in 100k 400k; do
  for f in 1 0; do
    echo "== $s fold=$f"
    TIGA_EA_FOLD=$f timeout $(tl 60) $R/bench/bench_edge_ops --graph $D/radius_$s.bin --providers fused --reps 20 --warmup 5 | grep -v '^{' | grep fused
  done
done
echo "elapsed ${SECONDS}s"; pack
cd $R/tests
for tool in memcheck racecheck; do
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  timeout $(tl 150) compute-sanitizer --tool $tool $extra --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/$tool.log 2>&1
  echo "$tool test_edge_attention (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/$tool.log | tail -1) $(grep -h Synthesis $o/$tool.log | tail -1)"
done
echo "elapsed ${SECONDS}s"; pack
